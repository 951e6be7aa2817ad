"""The documentation names what exists, and what exists is documented: the README's stage table
and docs/profiles.md against the stages, their check tables and profile schemas; the README's
fault list against the simulator's faults; the README's option tables against nodegate's
options; docs/reports.md against admission.json's schema, the transports and the run
directory's files (#21: docs/profiles.md said roce and nccl "land later", docs/reports.md left
out the slurm transport and `out_of_scope`)."""

from __future__ import annotations

import re
from pathlib import Path

from nodegate.core import results, schemas
from nodegate.core.settings import OPTIONS
from nodegate.profiles import profile_schema
from nodegate.session.transports import BUILTIN
from nodegate.sim.fabric_spec import SWITCH_FAULTS
from nodegate.sim.fleet import known_faults
from nodegate.sim.tools.traffic import SWITCH_FAULTS as TRAFFIC_SWITCH_FAULTS
from nodegate.stages.registry import STAGES

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
PROFILES = (REPO / "docs" / "profiles.md").read_text(encoding="utf-8")
REPORTS = (REPO / "docs" / "reports.md").read_text(encoding="utf-8")
SIM = REPO / "plugins" / "nodegate" / "sim"


def section(text: str, heading: str) -> str:
    """The text under a markdown heading, up to the next heading of the same or higher level."""
    level = heading.split(" ", 1)[0]
    start = text.index(heading + "\n") + len(heading) + 1
    pattern = "^#{1,%d} " % len(level)  # noqa: UP031 (braces of the regex)
    ends = [m.start() for m in re.finditer(pattern, text[start:], re.M)]
    return text[start : start + ends[0]] if ends else text[start:]


def cells(row: str) -> list[str]:
    """A markdown table row's cells (`\\|` inside a cell is no separator)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def rows(text: str) -> list[list[str]]:
    return [cells(ln) for ln in text.splitlines() if ln.startswith("| ") and "---" not in ln]


def ticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def test_readme_stage_table_is_every_stage_and_its_checks() -> None:
    table = {
        ticked(r[0])[0]: {t for t in ticked(r[1]) if re.fullmatch(r"[a-z_]+(\.[a-z0-9_]+)+", t)}
        for r in rows(section(README, "## Stages and checks"))[1:]
    }
    assert table == {s.name: set(s.checks.ids()) for s in STAGES}


def _keys(table_text: str) -> set[str]:
    """The first segment of each key a profile table names (`gpu.count` -> `gpu`)."""
    out = set()
    for r in rows(table_text)[1:]:
        for key in ticked(r[0]):
            if not key.startswith("."):  # `.phys_state`: the key before it, continued
                out.add(re.split(r"[.\[]", key, maxsplit=1)[0])
    return out


def _fragment_keys(stage: str) -> set[str]:
    frag = schemas.load(f"profile.{stage}")
    obj = frag if "properties" in frag else next(o for o in frag["oneOf"] if "properties" in o)
    return set(obj["properties"])


def test_profiles_doc_has_every_section_and_every_stages_keys() -> None:
    top = set()
    for r in rows(section(PROFILES, "## Top level"))[1:]:
        top |= set(ticked(r[0]))
    assert top == set(profile_schema()["properties"])
    for stage in (s.name for s in STAGES):
        assert _keys(section(PROFILES, f"## `{stage}`")) == _fragment_keys(stage), stage
    assert "land later" not in PROFILES


def test_readme_fault_list_is_the_simulators_faults() -> None:
    sim = section(README, "## The simulated fleet")
    end = re.search(r"The\s+RoCE fleet model", sim)
    assert end is not None
    listed = sim[sim.index("Faults: ") : end.start()]
    names = set(re.findall(r"`([a-z][a-z0-9_]*)(?:[:\[][^`]*)?`", listed))
    hardware = {"gpu_model", "hca"}  # hardware keys of a node's model, named among the faults
    for key in hardware:
        assert any(f'hw.get("{key}"' in p.read_text() for p in SIM.rglob("*.py")), key
    # switch faults live under the model's `fabric: {faults: [...]}` (named with their key)
    switch = set(SWITCH_FAULTS) | set(TRAFFIC_SWITCH_FAULTS) | {"fabric", "traffic"}
    assert names - hardware == (set(known_faults()) - {"slurmd_down"}) | switch
    assert "Fault `slurmd_down`" in sim  # with the simulated Slurm it needs


def test_readme_documents_every_option_and_only_those() -> None:
    documented = set()
    for line in README.splitlines():
        if line.startswith("| `--"):
            documented |= set(re.findall(r"`(--[a-z][a-z-]*)", cells(line)[0]))
        elif line.startswith("- `--"):
            documented |= set(re.findall(r"`(--[a-z][a-z-]*)", line.split(":", 1)[0]))
    assert documented == {o.flag for o in OPTIONS}


def test_reports_doc_names_admission_keys_statuses_transports_and_files() -> None:
    adm = section(REPORTS, "## admission.json")
    keys = set()
    for r in rows(adm)[1:]:
        keys |= {k for k in ticked(r[0]) if not k.startswith(("nodes.", "."))}
    schema = schemas.load("admission")
    assert keys == set(schema["properties"]) - {"nodes"}
    (reasons,) = [r for r in rows(adm) if r[0] == "`nodes.<name>.reasons[]`"]
    statuses = re.search(r"`status` \(([^)]*)\)", reasons[2])
    assert statuses is not None
    assert ticked(statuses[1]) == schema["$defs"]["reason"]["properties"]["status"]["enum"]
    (transport,) = [r for r in rows(adm) if r[0] == "`inventory`, `transport`"]
    assert set(ticked(transport[2])) == set(BUILTIN)
    tree = REPORTS[REPORTS.index("```") : REPORTS.index("```", REPORTS.index("```") + 3)]
    files = {v for k, v in vars(results).items() if k.endswith(("_FILE", "_DIR"))}
    outside = {results.BASELINE_FILE}  # written to --save-baseline DIR, not the run directory
    assert {f for f in files - outside if f not in tree} == set()
    assert all(f in REPORTS for f in outside)
