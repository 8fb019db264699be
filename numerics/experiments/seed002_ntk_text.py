"""The prose of the seed002-ntk section of ``docs/experiments.md`` (seed 002, Thm. 3.3 eq. (21), Sec. 5.1
Figs. 1 and 3), as data: named ``str.format`` templates that :mod:`.seed002_ntk_report` fills with the
numbers it computes from the summary.  The paper's statements quoted here are the paper's."""
from __future__ import annotations

TEXT = {
    "setup": ("nu_W = {nu_W}, nu_F = nu_C = {nu_F}, n_x = n_y = 1 for the NTK and Fig. 1. The paper states the limits "
              "and shows curves (Figs. 1 and 3) without numbers; the pass criteria are this reproduction's."),
    "ntk": "**Thm. 3.3 (NTK), T = {T}.** rho (eq. (21)): {rho}.",
    "dynamics": ("**Fig. 1 (training dynamics).** 50 / 50 sequences, T = 10, full-batch GD, the same step size for both "
                 "models:"),
    "delay": ("**Fig. 3 (delay).** n_x = 15, T = 20, 10 / 10 sequences, {draws} teacher draws, {steps} GD steps from "
              "zero; normalised test MSE (mean +- standard error):"),
    "zero.none": ("Every normalised test MSE in the table is below 1, the score of predicting 0 (the MSE is divided by "
                  "the mean squared test target)."),
    "zero": ("Predicting 0 scores exactly 1 here (the MSE is divided by the mean squared test target), so a value above "
             "1 is worse than predicting zero: {over} is above 1.{scaled}"),
    "zero.model": "the {model} convolution's at delay {delays}",
    "zero.delay": "{delay} ({nmse} +- {se})",
    "zero.scaled": (" At those delays the scaled convolution, whose lag-j weight is scaled by sqrt(rho_j) (falling "
                    "with the lag), does worse than no model at all, not merely worse than at short delays."),
    "figure": "![seed 002]({figure})",
    "criteria": "**Pass criteria**",
    "criterion": "* {text}: {verdict}{extra}.",
    "criterion.slope": " (slope {slope})",
    "criterion.value": " ({value} at n = {n})",
    "criterion.cross_lag": " ({values}; from {inits} inits per width, whose spread is in the NTK table)",
    "criterion.per_n": " ({values})",
    "criterion.per_n.item": "n = {n}: {value}",
    "criterion.delay": " (scaled {scaled}x, unscaled {unscaled}x)",
    "against": (
        "**Against the paper (Fig. 3).** The scaled convolution's bias against long lags shows clearly, but the "
        "unscaled convolution's normalised test error is not flat: it grows {ratio}x from delay 0 to 10 in the table "
        "above (standard errors there), where the paper describes it as 'almost the same ... slightly changing at "
        "larger delays'. With T = 20 a delay of 10 leaves half of each target sequence zero, so the model has half the "
        "signal to fit; the paper does not say how its test error is normalised or how long it trains."),
    "not_reproduced": (
        "**Not reproduced here.** The macaque S1 reaching task (Fig. 4, Table 1: R^2 values) needs the recording of "
        "[BFT+18], which is not available to this toolkit; the RNN of Fig. 3 (n_h = 1000) is not trained (Fig. 1 "
        "measures RNN against scaled convolution)."),
    "cost": "**Cost.** {timing}.",
}


def say(name: str, /, **values) -> str:
    """Template ``name`` filled with ``values``."""
    return TEXT[name].format(**values)


__all__ = ["TEXT", "say"]
