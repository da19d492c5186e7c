"""Static checks for device mistakes in PyTorch code: ``torchplace lint``.

Finds, before anything runs, the patterns that make GPU code slow or wrong: host syncs
every training step, GPU work timed without synchronising, tensors built on the CPU in
``forward``, tensor attributes that ``model.to()`` leaves behind, CUDA hard-coded,
``non_blocking`` copies towards the host, ``torch.load`` without ``map_location``,
losses accumulated with their graphs, ``nn.DataParallel``. Pure Python (``ast``); torch
is not imported. Every rule is documented in docs/lint.md.

Examples:
    >>> from torchplace import lint
    >>> src = (
    ...     "import torch\\nfor x in data:\\n    loss = model(x.cuda())\\n"
    ...     "    loss.backward()\\n    print(loss.item())\\n"
    ... )
    >>> [(f.line, f.code) for f in lint.lint_source(src)]
    [(5, 'TPL101')]
    >>> [(f.line, f.code) for f in lint.lint_source(src, select=["TPL203"])]  # opt-in
    [(3, 'TPL203')]
    >>> lint.rules_for_sim_event("item")
    ('TPL101',)
"""

from __future__ import annotations

from torchplace.lint.engine import LintResult, Skipped, lint_file, lint_paths, lint_source
from torchplace.lint.files import LintPathError
from torchplace.lint.finding import Edit, Finding, Fix
from torchplace.lint.fixes import fix_paths, fix_source
from torchplace.lint.rules import (
    RULES,
    SIM_EVENT_RULES,
    Rule,
    UnknownRuleError,
    resolve_codes,
    rules_for_sim_event,
)

__all__ = [
    "RULES",
    "SIM_EVENT_RULES",
    "Edit",
    "Finding",
    "Fix",
    "LintPathError",
    "LintResult",
    "Rule",
    "Skipped",
    "UnknownRuleError",
    "fix_paths",
    "fix_source",
    "lint_file",
    "lint_paths",
    "lint_source",
    "resolve_codes",
    "rules_for_sim_event",
]
