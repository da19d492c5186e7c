import io

import torch


def restore(model, path):
    model.load_state_dict(torch.load(path))  # expect: TPL301


def resume(args):
    checkpoint = torch.load(args.resume, weights_only=True)  # expect: TPL301
    return checkpoint["epoch"]


def read_metrics(metrics_file):
    return torch.load(metrics_file, weights_only=False)  # near miss: a data file, not a checkpoint


def roundtrip(state, model):
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    model.load_state_dict(torch.load(buffer, weights_only=True))  # near miss: saved just above


def test_state_dict_roundtrip(tmp_path, model):
    torch.save(model.state_dict(), tmp_path / "model.pt")
    model.load_state_dict(torch.load(tmp_path / "model.pt", weights_only=True))  # near miss: saved by the test
