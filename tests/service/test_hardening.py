"""Hardening of what the service hands out, over the real store and MLflow: exports
that escape their own format whatever the names and reasons hold."""

from __future__ import annotations

import csv
import io

from mlflow.tracking import MlflowClient
from sqlalchemy.orm import Session

from sweep_service.store import Owner, create_api_key, create_sweep
from tests.service.api_fixtures import Api, FakeTrial, bearer, write_trials
from tests.service.factories import make_draft

# A data-set name as a spreadsheet formula (names of older sweeps, or of trial runs
# written to MLflow by hand, are not checked by today's schema), and a failure's reason
# that breaks out of a LaTeX comment into live LaTeX and out of a Markdown table.
FORMULA = '=HYPERLINK("http://x")|x'
INJECTED = "diverged\n\\input{/etc/passwd}\n| a | b |"


def test_every_export_escapes_its_own_format(
    api: Api, session: Session, alice: Owner, tracking: MlflowClient
) -> None:
    sweep = create_sweep(session, alice.id, make_draft(trials=3)).sweep
    write_trials(
        tracking,
        sweep.id,
        [
            FakeTrial({"name": "ce"}, dataset=FORMULA, eval_f1=80.0),
            FakeTrial({"name": "dsc", "alpha": 0.1}, dataset=FORMULA, eval_f1=82.0),
            FakeTrial({"name": "focal"}, dataset=FORMULA, status="FAILED", reason=INJECTED),
        ],
    )
    headers = bearer(create_api_key(session, alice.id).plain_key)

    def export(fmt: str) -> str:
        answer = api.client.get(f"/v1/sweeps/{sweep.id}/grid?format={fmt}", headers=headers)
        assert answer.status_code == 200, answer.text
        return answer.text

    latex = export("latex")
    live = [line for line in latex.splitlines() if not line.startswith("%")]
    assert not any("\\input" in line for line in live), latex
    cells = [cell for row in csv.reader(io.StringIO(export("csv"))) for cell in row]
    assert f"'{FORMULA}" in cells
    assert not any(cell.startswith(("=", "+", "@")) for cell in cells)
    markdown = export("markdown")
    assert not any(line.startswith(("\\input", "| a |")) for line in markdown.splitlines())
    assert '=HYPERLINK("http://x")\\|x' in markdown
