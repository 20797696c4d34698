"""``agent swebench``: SWE-bench task instances in as seeds, predictions out, predictions evaluated.

Exit codes: ``import`` and ``predictions`` exit 0 when every line became a seed
(a prediction), and 2 when a line was refused (the others are written all the
same, and each refused line is named on stderr); ``evaluate`` exits 0 when every
prediction resolved its instance, 1 when one did not (unresolved, empty, an
error, or a line refused), and 2 when it could not evaluate at all.

Each command is a module of this package: :mod:`.importing`, :mod:`.predicting`
and :mod:`.evaluating`; :mod:`.shared` holds the options they share.
"""

from __future__ import annotations

from ..options import group
from .evaluating import evaluate
from .importing import import_tasks
from .predicting import predictions

app = group("SWE-bench task instances in as seeds, predictions out, predictions evaluated.")
app.command("import")(import_tasks)
app.command("predictions")(predictions)
app.command("evaluate")(evaluate)
