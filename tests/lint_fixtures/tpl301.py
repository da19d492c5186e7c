import torch

state = torch.load("ckpt.pt")  # expect: TPL301
module = torch.jit.load("model.pt")  # expect: TPL301
cpu_state = torch.load("ckpt.pt", map_location="cpu")  # near miss
positional = torch.load("ckpt.pt", "cpu")  # near miss: map_location given positionally
forwarded = torch.load("ckpt.pt", **options)  # near miss: cannot see the options


def roundtrip(model, path):
    torch.save(model.state_dict(), path)
    return torch.load(path)  # near miss: this program wrote the file on this machine


def roundtrip_file(model, path):
    with open(path, "wb") as f:
        torch.save(model, f)
    with open(path, "rb") as f:
        return torch.load(f)  # near miss: the same file, written above
