import torch


def load_resume(path):
    kwargs = {"map_location": "cpu"}
    return torch.load(path, **kwargs)  # expect: TPL302


def load_safe(path):
    kwargs = dict(map_location="cpu", weights_only=True)
    return torch.load(path, **kwargs)  # near miss: the dict has weights_only


def load_later_key(path, trusted):
    kwargs = {"map_location": "cpu"}
    kwargs["weights_only"] = not trusted
    return torch.load(path, **kwargs)  # near miss: the key is added


def load_passed(path, **kwargs):
    return torch.load(path, **kwargs)  # near miss: the caller's keywords
