"""The prose of the seed003-mqar sections of ``docs/experiments.md`` (seed 003, Zoology Sec. 4.3 / Fig. 2 top /
Claim 1), as data: named ``str.format`` templates that :mod:`.seed003_mqar_report` fills with the numbers it
computes from the summary.  No number of ours is written here; the paper's (App. E.2, F.1) are quoted as the
paper's.  ``{th}`` is the accuracy threshold, ``{N}``, ``{D}``, ``{d}`` the sizes, ``{acc}`` an accuracy."""
from __future__ import annotations

TEXT = {
    # what ran and why
    "setup": (
        "MQAR as Zoology App. E.1 (Algorithm 1 and the reference generator, `random_non_queries=False`): "
        "vocabulary {vocab:,}, (N, D) = {sizes}, power law alpha = {power_a} on the query gaps, the same data for every "
        "run. Models as the reference code's Fig. 2 configs (`build_model`): two layers, each a sequence mixer with "
        "pre-LayerNorm residuals, tied read-out, the reference init and dropout; attention: one causal softmax head "
        "with learned positions; BaseConv: the reference BaseConv with a width-3 short convolution in layer 1 and "
        "{long_conv} in layer 2, no positions. AdamW (weight decay {weight_decay}), {warmup_pct}% linear warm-up then "
        "cosine decay, batch {batch}, at most {steps:,} steps on {train_examples:,} training examples, test accuracy "
        "on {test_examples:,} examples every {eval_every} steps. Learning rates per mixer: each (mixer, N, d) runs "
        "every rate of its mixer with seeds {seeds} (initialisation and data order); a cell's value is the median "
        "over the seeds at the rate with the highest median, the seeds' range beside it."),
    "long_conv.implicit": "the implicit long convolution (the reference default, ImplicitLongConvolution)",
    "long_conv.explicit": ("the explicit long convolution (one learned filter per channel: the paper's Listing 1, "
                           "the reference's LongConvolution)"),
    "why": (
        "**Why this grid.** D = {Ds} at every N (App. F.1 varies N holding D constant) and N = {Ns}: {n_Ns} sequence "
        "lengths, so that the growth of BaseConv's width with N is measured, at sizes this CPU affords for the whole "
        "grid (its cost is the section's last line); the generator needs a vocabulary larger than N (the reference "
        "generator's assertion), so V = {vocab} would admit N up to {largest_N}, and the GPU grid below runs the "
        "paper's vocabulary and N. The widths start at d = {d_min} for both mixers: the smallest width at which "
        "attention reached {th} at every N in short exploratory runs{small}; BaseConv's go up to d = {d_max}{odd}{top}. "
        "Batch {batch}{paper_batch} and {steps:,} steps: in exploratory runs attention left the plateau in more seeds "
        "at this batch than at a larger batch with proportionally fewer steps (the same number of sequences)."),
    "why.small": " (d = {ds} beside the grid, below)",
    "why.odd": (", with d = {ds} between the powers of two, so that a growth with N of less than a factor of two in "
                "width can show"),
    "why.top": (", its smallest width reaching {th} at N = {Ns} (the grid's widest BaseConv cells are where it "
                "demonstrably learns)"),
    "why.paper_batch": " as App. E.2",
    "differences": "**Differences from the paper and its reference code** (everything else as they are): {items}.",
    "paper": ("The paper (Sec. 4.3, Fig. 2 top, Claim 1): {claim}. The figure is an image; the text gives no per-point "
              "accuracies, so the comparison is with these statements."),
    "table": "Test accuracy per cell: the median over seeds (their range) [the learning rate kept]:",
    "figure": "![seed 003 MQAR]({figure})",
    "criteria": "**Pass criteria** {head}",
    "criteria.head": ("(a cell below the threshold counts only where that mixer {verb} it somewhere in the grid within "
                      "as many steps)"),
    "criteria.verb.cpu": "demonstrably reaches",
    "criteria.verb.gpu": "reached",

    # the differences from the paper (App. E.2, F.1) and its reference code, each read from the grid's settings
    "diff.vocab": "vocabulary {vocab:,} (App. F.1: {paper:,})",
    "diff.sizes": ("(N, D) = {sizes} (App. F.1: N = 64 to 512; the reference configs: D = N/16, (64, 4), (128, 8), "
                   "(256, 16))"),
    "diff.dims": "d = {dims} (App. F.1: {paper})",
    "diff.lrs": ("learning rates per mixer {per} (App. E.2: the four of np.logspace(-4, -2, 4) for every cell, the "
                 "best kept{off})"),
    "diff.lrs.mixer": "{mixer} {lrs}",
    "diff.lrs.off": "; {lrs} is above that range",
    "diff.seeds": ("{n} seed(s) per cell, the median over them kept at each learning rate (the paper: one run per cell "
                   "and learning rate){more}"),
    "diff.seeds.more": ("; the seed sets the initialisation and the order in which the training set is visited "
                        "(App. E.2 keeps the data order constant; the data here are the same for every run)"),
    "diff.steps": ("at most {steps:,} steps of batch {batch} ({sequences:,} sequences, {epochs} epochs of "
                   "{train_examples:,} training examples; App. E.2: 64 epochs of 100,000, batch 64; the reference "
                   "configs: batch 512 at N <= 128), a warm-up of {warmup_pct}% and the cosine decay laid over those "
                   "steps"),
    "diff.test": "{test_examples:,} test examples (App. E.2: {paper:,})",
    "diff.alpha": "alpha = {power_a} (App. F.1: {paper}; the reference configs 0.01)",
    "diff.alpha.paper": "alpha = {paper} as App. F.1 (the reference configs use 0.01)",
    "diff.mlp": ("no MLP after each mixer, as the reference configs (state mixer Identity); App. E.2's text says one "
                 "sequence mixer and one MLP per layer"),
    "diff.stop": ("a run stops once its test accuracy reaches {stop_at}, and a cell reports the best test accuracy "
                  "over its evaluations (every {eval_every} steps)"),
    "diff.filter": ("BaseConv's long filter explicit, one learned filter of length N per channel as the paper's "
                    "Listing 1 and the reference code's LongConvolution (`implicit_long_conv=False`); the reference "
                    "configs use its default, the implicit filter (an MLP of the positions){implicit}"),
    "diff.filter.implicit": ": with it {hit} of {n} runs at N = {N}, d = {d} reached {th} (below)",

    # the criteria and the plateau
    # the headline: the deciding criterion's result first (issue 45 item 1), then the criteria that read less
    "headline": ("**Claim 1 in this setting: {said}.** The paper's claim: attention's smallest width reaching {th} "
                 "does not grow with N, BaseConv's does. Read by the one criterion that measures both mixers alike "
                 "(widths {widths} for both, N = {Ns}, the median over {want} seeds at every cell that decides a "
                 "crossing): {per}.{steps}{others}"),
    "headline.said.met": "shown",
    "headline.said.not": "not shown",
    "headline.said.open": "undecided (cells missing)",
    "headline.steps": " From one N to the next: {per}.",
    "headline.others": (" The {n} other criteria below read only the first grid (N = {Ns}; {dims}; seeds {seeds}), "
                        "not the width grid both mixers share: {met} of {n} met there."),
    "headline.dims": "{mixer} d = {ds}",
    "index": "Claim 1 (both mixers on one width grid, {want} seeds): **{said}**; {others}",
    "index.others": "{met} of {n} criteria on the narrower first grid ({seeds} seeds, N = {Ns}) met",
    "crit.narrower": " (reads only the first grid: N = {Ns}; {dims}; seeds {seeds})",
    "crit": "* {text}: {verdict}{unread}{narrower}.",
    "crit.unread": " where read (not read at N = {Ns})",
    "crit.per_N": "  Per N: {per}.",
    "crit.per_N.item": "N = {N}: {said}",
    "crit.gap": "  Smallest d reaching the threshold: {per}.",
    "crit.gap.item": "N = {N}: attention {attention}, BaseConv {baseconv}",
    "crit.growth": "  BaseConv's smallest d reaching the threshold: {per}; from one N to the next: {steps}.",
    "crit.growth.item": "N = {N}: {d}",
    "crit.growth.step": "{pair}: {said}",
    "crit.note": "  {note}.",
    "none": "none",
    "yes": "yes",
    "no": "no",
    "plateau": "* {mixer}: {parts}.",
    "plateau.N": ("N = {N} (1/D = {inv_D}): {left} of {n} runs left the plateau, {hit} reached {th}"),
    "plateau.memorised": (
        "* Fitted the training set without learning the lookup (final training loss below a quarter of log D, best "
        "test accuracy below 0.75): {runs}. With {train_examples:,} training examples a wide model can memorise them: "
        "these cells say nothing about the width the lookup needs."),
    "plateau.memorised.run": "{mixer}, N = {N}, d = {d}, seed {seed}: training loss {loss}, test {acc}",
    "plateau.high": (
        "* Training loss at the end nearer log V (a uniform guess over the vocabulary) than log D (the plateau of the "
        "D context values): {runs} (log V = {log_V}): an optimisation that had not even reached the plateau at this "
        "learning rate and width (the paper sweeps four rates per cell and keeps the best)."),
    "plateau.high.run": "{mixer}, N = {N}, d = {d}, lr {lr}, seed {seed}: {loss}",

    # the grid's failures and its cost
    "failed": "**Cells without a result** (the table uses the other runs only): {cells}.",
    "failed.cell": "{mixer}, N = {N}, d = {d}, lr {lr}, seed {seed} ({error})",
    "failed.error": "failed",
    "gone": ("**Cells the grid no longer has.** The run's command also started {n} cells that the grid as committed "
             "does not contain ({Ns}); each failed at once, before training: {errors}. They are counted in the cost "
             "line's cells and failures, and in no result."),
    "gone.N": "N = {N}",
    "cost": "**Cost.** {timing}. CPU: {per}.{carried}",
    "cost.widths": (" The width grid's {cells} records beyond the CPU grid were made by `python -m numerics.sweep run "
                    "{grid_file} --out {out} --workers 1` (under `nice -n 19`, on this 2-core machine shared with other "
                    "jobs; code version {sources}), finished {first} to {last} UTC: {cpu} of CPU, {wall} of wall time "
                    "summed over the cells; added to this folder's records by `python -c \"import "
                    "numerics.experiments.seed003_mqar as m; m.add_widths_records()\"`."),
    "cost.part": "{what} cells {cpu}",
    "cost.pooled": (
        "; that the rewrite changes no training was checked on {cell}, {steps} steps at {before} and at {after}, each "
        "from a snapshot outside the checkout (`git archive REV | tar -x -C DIR`, then from another folder "
        "`PYTHONPATH=DIR python -c \"import json, sys, numerics.experiments.seed003_mqar as m; "
        "print(json.dumps(m.cell(json.loads(sys.argv[1]))['history']))\" CONFIG` with that cell's config and "
        "`steps` {steps}): the same training loss and test accuracy at every evaluation, bit for bit; a check of the "
        "first steps of {n_cells}, not of every record"),
    "cost.carried": (
        " {cells} of the cells are records made by an earlier code version (sources {sources}, finished {finished}; "
        "{cpu} of CPU), carried over by hand rather than trained again, the others trained by the command above: each "
        "record's code version was rewritten to the running version's and its digest recomputed, the original version "
        "kept in its `made_by`, so the sweep runner's own check (a record is reused only where the same code made it) "
        "was passed by editing the records, and that their cell function, models and data were unchanged was read by "
        "the person who carried them, not verified by a program (`python -m numerics.experiments seed003-mqar --carry "
        "REV --out DIR`, which carries a record only where the code its cell runs is unchanged since the commit "
        "that made it, came later; the runner reruns any other record another code version made; at the code that made "
        "the width grid's records it refuses these: the cell's code has changed since they were made, in `PARTS` (a part "
        "added) and in `train` and `train_step` (the MQAR step without host syncs, issue 45 item 4; "
        "tests/numerics/training/test_host_syncs.py checks that it steps as the masked step did), so records made "
        "before and after that rewrite pool in the same cells{pooled}). A run is repeatable on one machine, not across "
        "machines (the float kernels differ), so a carried record and one trained here are two draws of the same "
        "seed."),

    # the smallest-width criterion (both mixers alike, every seed recorded)
    "crit.widths": ("  Smallest d reaching the threshold (the median over {want} seed(s) per cell; a cell with fewer "
                    "recorded is read only where those settle that median, else it is open): {per}."),
    "crit.widths.steps": "  From one N to the next: {per}.",
    "crit.widths.steps.mixer": "{mixer}: {steps}",
    "crit.widths.step": "{pair}: {said}",
    "crit.widths.open": "N = {N}: from d = {lo} to {hi} (open: {why})",
    "crit.widths.open.above": "N = {N}: d = {lo} or more (open: {why})",
    "crit.widths.why.seeds": "seeds missing",
    "crit.widths.why.short": "runs below the threshold trained too little to count",
    "crit.widths.missing": ("  Undecided for {mixers}. The open cells that decide it (at each N where its crossing is "
                            "open): {cells}."),
    "crit.widths.missing.short": ("{mixer}, N = {N}, d = {d} (below it, but trained fewer steps than the mixer needed "
                                  "to reach it elsewhere)"),
    "crit.widths.missing.cell": "{mixer}, N = {N}, d = {d} ({n} seeds recorded, {missing} of {want} without a record)",
    "crit.widths.mixer": "{mixer}: {per} ({said})",
    "crit.widths.item": "N = {N}: {d}",
    "crit.widths.above": "above d = {top}",
    "crit.widths.decide": ("  The cells that decide each crossing (the smallest width reaching it and the width below "
                           "it): {cells}.{few}"),
    "crit.widths.cell": "{mixer}, N = {N}, d = {d}: {hit} of {n} seeds (median {median}; {state})",
    "crit.widths.few": (" With fewer than {want} seeds: {cells}; the issue's rule asks for at least {want} at every cell "
                        "that decides a crossing, so the reading rests on fewer draws there."),
    "crit.widths.few.cell": "{mixer}, N = {N}, d = {d} ({n})",
    "crit.widths.lowest": ("  {mixer} reaches it at the lowest width it ran at N = {Ns} (d = {d}), so its smallest width "
                           "there is d = {d} or less."),

    # the setting beside the verdict
    "setting": ("**What the setting does to these verdicts.** {items}."),
    "setting.N": ("N = {Ns} where the paper runs {paper_lo} to {paper_hi} ({lo}x to {hi}x longer): the growth with N is "
                  "read over {pairs} doubling(s) of N at lengths far below the paper's, so it says nothing about how the "
                  "widths grow over the paper's range"),
    "setting.vocab": ("vocabulary {vocab:,} where the paper has {paper:,} ({ratio}x smaller): the embedding has {keys} "
                      "keys to tell apart instead of {paper_keys:,}, so the widths needed here are not the paper's widths; "
                      "only their growth with N is compared"),
    "setting.vocab_at": ("the width grid's N = {Ns} at vocabulary {vocab} instead of {base} (the generator needs a "
                         "vocabulary above N), so the vocabulary per position falls as N grows ({ratios}): the step to "
                         "N = {Ns} changes the number of keys as well as the length, more keys to tell apart at the "
                         "larger N, which may raise either mixer's needed width beside any growth with N"),
    "setting.vocab_at.ratio": "V/N = {r} at N = {N}",
    "setting.epochs": ("{epochs} epochs where the paper trains 64 ({ratio}x fewer): a cell below the threshold may be "
                       "short of training; the criteria count such a cell only where the mixer reached the threshold "
                       "within as many steps elsewhere, but a width that needs more training than the grid gives would "
                       "read as too narrow, which biases every smallest width upwards"),
    "setting.lr": ("one learning rate per mixer ({lrs}), tuned at one cell each ({cells}), where the paper keeps the best "
                   "of four rates at every cell: a cell that another rate would lift above the threshold reads as below "
                   "it, so each smallest width is an upper bound for the paper's procedure"),
    "setting.lr.cell": "{mixer} at N = {N}, d = {d}",
    "setting.positions": ("at N = {fixed} the {D} queries sit at the same positions in every example (the gaps are drawn "
                          "without replacement from {gaps} possible, so all {gaps} are used: one set of query "
                          "positions, and alpha has no effect), against {sets}: a model can "
                          "solve N = {fixed} by position alone, so the step from N = {fixed} to {other} changes the "
                          "task's kind as well as its length, and a growth of either mixer's width over it need not be "
                          "a growth with N"),
    "setting.positions.set": "{sets:,} possible sets at N = {N}",

    # the cells the width grid still lacks
    "missing": ("**What measuring both mixers alike still needs** (issue 45 item 1: widths {dims} for both mixers, "
                "seeds {seeds} at every cell, N = {Ns}; N = {vocab_Ns} at vocabulary {vocab_at} since the generator "
                "needs a vocabulary above N). {n} cells have no record: {cells}. Estimated {hours} CPU hours on this "
                "machine ({how}; a run that stops early at 0.99 costs less, one on a loaded machine more). Per N, the "
                "whole width grid (both mixers, every width, 5 seeds; a seed's CPU the mean of its records) in CPU hours, "
                "recorded + estimated for its missing cells: {per_n}. The grid file `{grid_file}` holds "
                "exactly these cells, those that decide each mixer's crossing first, the cheapest (N x d) first (written from this summary by "
                "`python -c \"import numerics.experiments.seed003_mqar as m; m.write_widths_grid()\"`; the order: "
                "`decide_order` in numerics/experiments/seed003_mqar.py); `python -m numerics.sweep run {grid_file} "
                "--out {out} --workers 1` runs them in that order, resumably (a record per cell as it finishes; run from a "
                "snapshot of the checkout, `git archive HEAD | tar -x -C SNAP` then `cd SNAP` with absolute paths to "
                "the grid file and the folder, so that edits to the working tree during the run cannot change the "
                "cells' code version: Python puts the current directory before PYTHONPATH), and "
                "`python -c \"import numerics.experiments.seed003_mqar as m; m.add_widths_records()\"` then "
                "`python -m numerics.experiments seed003-mqar --resummarise --out docs/experiments/seed003-mqar` "
                "bring the new records into this section."),
    "relapse": ("**Wider is not always better here.** Above its smallest width reaching {th}, {mixer}'s median "
                "falls below {th} again at {cells}. Every width runs the one learning rate of its mixer ({lr}, tuned "
                "at {tuned}), and at that rate these wider models did not reach it, so accuracy is not "
                "monotone in width in this setting; the smallest-width criterion reads the first crossing only, and "
                "another learning rate per width (the paper keeps the best of four at every cell) may lift these "
                "cells."),
    "relapse.cell": "N = {N}, d = {d} (median {median} over {n} seeds, {reached} of {n} reaching it)",
    "relapse.untuned": "no recorded tuning cell",
    "missing.group": "{mixer}, N = {N}: {cells}",
    "missing.per_n": "N = {N}: {done} + {left} = {whole}",
    "missing.cell": "d = {d} (seeds {seeds})",
    "missing.how.cell": "{n} cell(s) at the mean CPU per recorded run of that cell",
    "missing.how.width": "{n} at the recorded width nearest theirs at the same mixer and N, scaled in proportion to d",
    "missing.how.length": ("{n} at the nearest recorded width at the largest N below with runs, scaled in proportion "
                           "to d and to N"),
    "missing.how.none": "{n} without any estimate (no run of that mixer at that N or below)",

    "cost.verified": (
        " {cells} of the cells are records made by an earlier code version (sources {sources}; {cpu} of CPU), carried "
        "by `python -m numerics.experiments seed003-mqar --carry REV` from commit(s) {commits}: their code version "
        "recomputed from that commit's sources, and the code their cell runs checked unchanged since."),

    # the parts of the grid beside the criteria
    "tune": ("**Learning rates, tuned per mixer** (part of the grid, not read by the criteria): N = {N}, seed {seed}, "
             "each mixer at one width with the paper's rates (App. E.2: np.logspace(-4, -2, 4)){extra}; best test "
             "accuracy (steps run):"),
    "tune.extra": " and {lrs}",
    "tune.cell": "{acc} ({steps:,})",
    "tune.note": ("{mixer}: the rule picks {top}, the grid ran {grid} (here: {runs}); the grid's rate was fixed before "
                  "these cells ran"),
    "tune.note.run": "lr {lr}: accuracy {acc}, final training loss {loss}",
    "tune.rule": (
        "The rule (`tuned_lr`): the run that reached the threshold in the fewest steps; if none did, the highest best "
        "test accuracy, where accuracies within two standard errors of it (sqrt(p (1 - p) / (test examples x D)) count "
        "as a tie, broken by the lowest final training loss. {verdict}"),
    "tune.rule.kept": "Each mixer's grid rate is its tuned rate.",
    "tune.rule.not_kept": "**Not the tuned rate:** {notes}.",
    "long": ("**A longer run** (part of the grid, not read by the criteria): {mixer}, N = {N}, d = {d}, lr {lr}, seed "
             "{seed}, {steps:,} steps (the grid's cells: at most {grid_steps:,}): best test accuracy {acc} (1/D = "
             "{inv_D}){first}, final training loss {loss} (log D = {log_D}){grid}."),
    "long.first": ", first at or above {th} at step {step:,}",
    "long.never": ", never {th}",
    "long.grid": "; the same cell in the grid: {acc} after {steps:,} steps",
    "small": ("**Attention at d = {d}** (part of the grid, not read by the criteria; the grid's widths start at "
              "d = {d_min}): lr {lr}, at most {steps:,} steps, best test accuracy {per}. The grid starts at the "
              "smallest width at which attention reached the threshold at every N in short exploratory runs; these "
              "cells show what it does one width below."),
    "small.N": "N = {N}: {runs}, {hit} of {n} at or above {th}",
    "run.seed": "{acc} (seed {seed}{first})",
    "run.from_step": ", from step {step:,}",
    "more": ("**More seeds where BaseConv crosses the threshold** (part of the grid, not read by the criteria): "
             "BaseConv at d = {ds} with seeds {seeds} beside the grid's, lr {lr}, at most {steps:,} steps: {cells}. "
             "Over all these seeds BaseConv's smallest width reaching {th} (the median; every seed of the grid's "
             "smaller widths below {th}) is {per}: {verdict}{factor}."),
    "more.cell": "N = {N}, d = {d}: {runs}; over seeds {seeds}: median {median}, {hit} of {n} at or above {th}",
    "more.verdict.unread": "so the growth is not read over these seeds",
    "more.verdict.grows": "it grows with N over these seeds too",
    "more.verdict.flat": "over these seeds it does not grow with N, unlike the grid's three seeds",
    "more.N": "N = {N}: {d}",
    "more.N.beyond": "above the widths with more seeds",
    "more.N.next": "above d = {top}, so d = {d}, the grid's next width reaching it over its seeds",
    "more.N.d": "d = {d}",
    "more.N.unread": "not read",
    "filter": ("**The reference's implicit long filter** (part of the grid, not read by the criteria): BaseConv with "
               "the implicit filter (an MLP of (t, cos, sin), the reference default), N = {N}, d = {d}, lr {lr}, "
               "{steps:,} steps: best test accuracy {runs}, {hit} of {n} at or above {th}{grid}."),
    "filter.grid": ("; the grid's explicit filter at the same cell: median {acc} over seeds {seeds} ({accs}), at lr "
                    "{lr}"),

    # what the CPU grid shows
    "reading": ("**What this grid shows.** Attention reaches {th} (median over seeds) {attention}; {attention_runs}. "
                "BaseConv: {baseconv_runs}{best}."),
    "reading.attention": "N = {N}: {where}",
    "reading.attention.from": "from d = {d}",
    "reading.attention.none": "at no d of the grid",
    "reading.runs": "{hit} of {n} runs reached it{which}",
    "reading.run": "N = {N}, d = {d}, seed {seed}: {acc}{first}",
    "reading.run.from": " from step {step:,}",
    "reading.best": "; its best cell {cells}",
    "reading.best.cell": "N = {N}: {acc} at d = {d} (1/D = {inv_D})",
    "reading.steps": "{steps:,} steps of batch {batch}",
    "reading.neither": (
        "At this budget ({steps} per run) neither side of Claim 1 shows: the step at which a run leaves the 1/D plateau "
        "varies with the seed, and most runs of either mixer had not left it when their steps ran out, so the criteria "
        "are not met or not read, and this grid is no evidence about the width either mixer needs. The GPU section "
        "below tests the claim at the paper's sizes with up to the paper's training."),
    "reading.no_baseconv": (
        "Within the CPU budget ({steps} per run) BaseConv reaches {th} at no width (its best cell above), so this grid "
        "cannot show the width BaseConv needs, the BaseConv side of Claim 1: the gap, the growth with N and d >= N are "
        "not read here, never met by default. The GPU section below shows what more training gives BaseConv."),
    "reading.gap.met": ("BaseConv needs a larger d than attention at every N of the grid, the ordering of Claim 1 at "
                        "these sizes."),
    "reading.gap.not_met": "The gap is not shown at every N (see the criteria above).",
    "reading.at_least_N.met": " BaseConv reaches it only from d >= N, as the paper states.",
    "reading.at_least_N.not_met": " BaseConv reaches it below d = N at some N, unlike the paper's statement (d >= N).",
    "reading.widths": ("Read alike for both mixers over {want} seed(s) per cell (the last criterion), each mixer's "
                       "smallest width reaching {th} from the smallest N to the largest: attention's {att_said} "
                       "({att}), BaseConv's {bc_said} ({bc}); from one N to the next: {steps}: {verdict}."),
    "reading.widths.undecided": ("undecided: cells open (named under the criterion), so this setting neither shows "
                                 "nor refutes Claim 1's contrast yet"),
    "reading.widths.met": "the contrast Claim 1 states",
    "reading.widths.not_met": ("not the contrast Claim 1 states (attention's width growing nowhere, BaseConv's growing), so "
                               "this setting does not show Claim 1, whatever the three-seed criteria above say"),
    "reading.widths.none": "the contrast is not read",
    "seeds": "BaseConv's seeds reaching {th} per width: {per}.{split}",
    "seeds.N": "N = {N}: {cells}",
    "seeds.cell": "d = {d}: {hit} of {n}",
    "seeds.split": (" Where the seeds split the median decides the cell: {cells}, so the smallest d reaching the "
                    "threshold there rests on the seeds' draw."),
    "seeds.split.cell": "N = {N}, d = {d}: {runs}, median {median}",
    "growth.N": "N = {N}: {d}",
    "growth.N.d": "d = {d}",
    "growth.N.above": "above d = {top}",
    "growth.step.two": "a factor of two",
    "growth.step.factors": "factors of {factors}",
    "growth.step.one": "one width",
    "growth.met": ("BaseConv's smallest width reaching {th} grows with N ({per}): the growth with N that Claim 1 "
                   "states. The grid's widths are {step} apart, so the size of the growth is resolved only to that "
                   "step{more}."),
    "growth.not_met": ("BaseConv's smallest width reaching {th} per N ({per}): the growth with N that Claim 1 states is "
                       "not shown at these widths (a growth by less than the grid's step between widths, {step}, would "
                       "not show here)."),
    "factor": ("from N = {N0} to {N1} (x{k}) it grows by a factor in ({lo}, {hi}) (it lies in ({lo0}, {hi0}] at "
               "N = {N0} and in ({lo1}, {hi1}] at N = {N1}): {where} proportion to N at these sizes"),
    "factor.less": "less than in",
    "factor.more": "more than in",
    "factor.same": "consistent with growth in",
    "factor.inf": "inf",
    "factor.ratios": "{factors}, where it is {lo} to {hi} times N (the paper: d >= N)",
    "factor.ratio": "{factors}, where it is {ratio} times N (the paper: d >= N)",
    "split": "the seeds split at the smallest width at {Ns}, so the growth rests on the medians there",
    "split.N": "N = {N} (d = {d}: {hit} of {n} seeds)",
    "equal": "At equal width BaseConv's median accuracy ({Ns}) {falls}{other}{stopped}.",
    "equal.d": "d = {d} ({accs})",
    "equal.falls": "falls with N at {ds}",
    "equal.falls.none": "falls with N at no width",
    "equal.other": "; it does not at {ds}",
    "equal.stopped": "; at d = {ds} every N's runs stopped at {stop} (the early stop)",

    # the GPU grid
    "gpu.setup": (
        "The GPU grid (`--grid gpu`): the paper's sizes, vocabulary {vocab:,} and alpha = {power_a} (App. F.1), "
        "(N, D) = {sizes} (the reference configs' D = N/16), d = {dims}, {train_examples:,} training and "
        "{test_examples:,} test examples (App. E.2), batch {batch} (the reference configs'), learning rate {lrs} only "
        "(the largest of the paper's four), seed(s) {seeds}, at most 64 epochs ({steps:,} steps), a run stopping at "
        "{stop_at}; the models as the CPU grid's, BaseConv with {long_conv}. The cells shared one wall-clock budget of "
        "{budget} s on the card ({workers} at a time): each measured its step time and ran the steps that fitted (the "
        "warm-up and cosine schedule laid over them), so the cells ran different numbers of steps: in brackets below."),
    "gpu.table": "Test accuracy [learning rate, steps run]:",
    "gpu.first": "Step at which a run first reached {th}: {runs}.",
    "gpu.first.run": "{mixer}, N = {N}, d = {d}: {step:,}",
    "gpu.figure": "![seed 003 MQAR on {card}]({figure})",
    "gpu.card": "a GPU",
    "gpu.criteria": "**Criteria, on what ran** {head}",
    "gpu.redefined": ("These criteria were written after the run: the cells ran on {ran}, and the summary that holds "
                      "the criteria was made again from their records with later code (`--resummarise`, {when}), "
                      "whose criteria differ from those the run was planned against; read them as a reading of the "
                      "records, not as a test fixed before the run."),
    "gpu.reading": "**What the GPU run shows.** {parts}.{tail}",
    "gpu.N.attention": "N = {N}: attention from d = {d}",
    "gpu.N.attention.none": "N = {N}: attention at no d",
    "gpu.N.baseconv": ", BaseConv from d = {d} ({ratio} N){below}",
    "gpu.N.below": "; below it {cells}",
    "gpu.N.below.cell": "d = {d}: {acc} after {steps:,} steps",
    "gpu.N.baseconv.none": ", BaseConv at no d (best {acc}); its cells ran {low:,} to {high:,} steps{unread}",
    "gpu.N.unread": (", fewer than the {need:,} after which BaseConv reached {th} elsewhere in the grid: not read"),
    "gpu.tail": " Where read (N = {Ns}), BaseConv needs a larger d than attention, the ordering of Claim 1{at_least}.",
    "gpu.tail.at_least_N": ", and at least d = N (N = {Ns}), as the paper states",
}

#: the number of sequence lengths, in words (:func:`.seed003_mqar_report.why_line`)
COUNT_WORDS = {2: "two", 3: "three", 4: "four"}
#: the smallest-width criterion's reading of one mixer from the smallest N to the largest
WIDTHS_SAID = {"grows": "grows", "same": "the same", "smaller": "smaller", "not larger": "not larger (the same or smaller)",
               "undecided": "undecided: cells missing",
               "short": "not read: runs below the threshold trained too little", None: "not read"}
#: a cell's state in the smallest-width criterion (:func:`numerics.experiments.seed003_mqar.cell_state`)
#: the check that records made before and after f398b4c (the MQAR step without host syncs) train alike: what ran
#: (the cost line's "cost.pooled"); a past check's facts, not read from the records
POOLED_CHECK = {"before": "f398b4c^", "after": "f398b4c", "steps": 600,
                "cell": "baseconv, N = 32, d = 64, seed 0, lr 0.01 (the width grid's settings)", "n_cells": "one cell"}
STATE_SAID = {"reach": "reaches it", "below": "below it", "open": "open"}
#: a criterion's per-N reading between one N and the next (``>``: larger, ...)
GROWTH_SAID = {">": "larger", "=": "the same", "<": "smaller", None: "not read"}


def say(name: str, /, **values) -> str:
    """Template ``name`` filled with ``values``."""
    return TEXT[name].format(**values)


__all__ = ["TEXT", "POOLED_CHECK", "COUNT_WORDS", "GROWTH_SAID", "STATE_SAID", "WIDTHS_SAID", "say"]
