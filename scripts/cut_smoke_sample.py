"""Cut the smoke preset's sample of UD English EWT out of the full treebank, into the
package (``search_spaces/samples/ud_en_ewt_sample``), with the treebank's licence.

The sentences are the ones the smoke sweep trained and was scored on when it read the
full treebank: its caps (2,000 training, 500 dev sentences) drawn as a trial draws
them (``trainables.trial_data._cap``: ``stratified_sample`` with ``CAP_SEED``), kept
in file order as CoNLL-U blocks, comments and all. Run from the repository root:

    .venv/bin/python scripts/cut_smoke_sample.py [DATASETS_DIR]
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from search_spaces.datasets import SAMPLES_DIR, get_dataset
from trainables.data.classes import stratified_sample
from trainables.data.readers import read_conllu
from trainables.trial_data import CAP_SEED

SOURCE = "ud_english_ewt"
CAPS = {"en_ewt-ud-train.conllu": 2000, "en_ewt-ud-dev.conllu": 500}
ATTRIBUTION = """# UD English EWT: the smoke preset's sample

{counts} of Universal Dependencies English Web Treebank v2.15
(https://github.com/UniversalDependencies/UD_English-EWT), unchanged CoNLL-U
sentences chosen as the smoke sweep's trials choose them from the full treebank
(`scripts/cut_smoke_sample.py`).

Universal Dependencies English Web Treebank annotations © 2013-2021 by The Board of
Trustees of The Leland Stanford Junior University, licensed under Creative Commons
Attribution-ShareAlike 4.0 International (LICENSE.txt beside this file). This sample
is shared under the same licence.
"""


def sentence_blocks(path: Path) -> list[str]:
    """The CoNLL-U sentences of ``path`` as text blocks, each ending in a blank line.

    Raises:
        ValueError: the blocks do not match the sentences ``read_conllu`` reads.
    """
    blocks = [b.strip("\n") + "\n\n" for b in path.read_text("utf-8").split("\n\n") if b.strip()]
    if len(blocks) != len(read_conllu(path)):
        raise ValueError(f"{path}: {len(blocks)} blocks but {len(read_conllu(path))} sentences")
    return blocks


def main(datasets_dir: Path) -> None:
    source, target = datasets_dir / SOURCE, SAMPLES_DIR / get_dataset("ud_en_ewt_sample").name
    target.mkdir(parents=True, exist_ok=True)
    for name, cap in CAPS.items():
        chosen = stratified_sample(sentence_blocks(source / name), cap, CAP_SEED)
        (target / name).write_text("".join(chosen), encoding="utf-8")
    shutil.copyfile(source / "LICENSE.txt", target / "LICENSE.txt")
    counts = " and ".join(f"{cap:,} sentences of {name}" for name, cap in CAPS.items())
    (target / "README.md").write_text(ATTRIBUTION.format(counts=counts), encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("../shared/data"))
