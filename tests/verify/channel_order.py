"""Shared by the import tests: a precision-ls state_dict with its channels in another order."""


def permute_channels(sd: dict, perm: list[int]) -> dict:
    """``sd`` with new channel j holding old channel ``perm[j]``: both axes of every projection
    matrix, the first axis of every tensor as long as the channel count."""
    out = {}
    for k, v in sd.items():
        if k.endswith("proj.weight") or k.endswith("projection.weight"):
            v = v[perm][:, perm]
        elif v.ndim >= 1 and v.shape[0] == len(perm):
            v = v[perm]
        out[k] = v
    return out
