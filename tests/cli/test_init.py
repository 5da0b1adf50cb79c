"""`rag-gate init`: the scaffold validates, runs as it is, and never overwrites a file."""

import json

from click.testing import CliRunner
from helpers import REPO

from gate.cli import main
from gate.scaffold import FILES


def test_init_scaffolds_what_a_repository_needs_and_validates_it(tmp_path):
    result = CliRunner().invoke(main, ["init", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for relative in FILES:
        assert f"created: {tmp_path / relative}" in result.stdout
    assert f"{tmp_path / 'rag-gate.yml'}: OK — golden set eval/golden.jsonl: 6 cases (2 out-of-domain)" in result.stdout
    # the template's 4 + 2 cases cannot fail any of the 8 default gated metrics: README's figures, 8 and 10 cases
    assert "too few cases for 8 of 8 gated metrics to ever fail" in result.stderr
    assert "hit_rate@5 (4 in-domain case(s), needs ≥ 8)" in result.stderr
    assert "refusal (2 out-of-domain case(s), needs ≥ 8)" in result.stderr
    assert "error_rate (6 case(s), needs ≥ 10)" in result.stderr  # every case: out-of-domain ones can crash too
    golden = [json.loads(line) for line in (tmp_path / "eval" / "golden.jsonl").read_text().splitlines()]
    assert sum(c.get("out_of_domain", False) for c in golden) == 2 and all(c["id"] for c in golden)
    workflow = (tmp_path / ".github" / "workflows" / "rag-gate.yml").read_text()
    assert workflow == (REPO / "examples" / "workflows" / "rag-gate.yml").read_text()  # one workflow, documented
    stub = (tmp_path / "rag_pipeline.py").read_text()
    assert "def answer(case" in stub and '"retrieved"' in stub and "Raise an exception" in stub  # the contract


def test_the_scaffold_runs_as_it_is(tmp_path):
    assert CliRunner().invoke(main, ["init", str(tmp_path)]).exit_code == 0
    out = tmp_path / "runs" / "first"
    result = CliRunner().invoke(main, ["run", "--config", str(tmp_path / "rag-gate.yml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    value = {(s["id"], s["metric"]): s["value"] for s in scores}
    golden = [json.loads(line) for line in (tmp_path / "eval" / "golden.jsonl").read_text().splitlines()]
    for case in golden:  # the stub finds every expected document and refuses every out-of-domain question
        if case.get("out_of_domain"):
            assert value[(case["id"], "refusal")] == 1.0
        else:
            assert value[(case["id"], "hit_rate@5")] == 1.0 and value[(case["id"], "false_refusal")] == 0.0


def test_init_never_overwrites_and_still_validates_what_is_there(tmp_path):
    (tmp_path / "rag-gate.yml").write_text("golden: eval/golden.jsonl\npipline: {python: x:y}\n")
    (tmp_path / "rag_pipeline.py").write_text("# mine\n")
    result = CliRunner().invoke(main, ["init", str(tmp_path)])
    assert result.exit_code == 2  # the user's config has a typo: validate says so
    assert f"kept: {tmp_path / 'rag-gate.yml'} (exists, left as it is)" in result.stdout
    assert f"kept: {tmp_path / 'rag_pipeline.py'} (exists, left as it is)" in result.stdout
    assert f"created: {tmp_path / 'eval' / 'golden.jsonl'}" in result.stdout
    assert (tmp_path / "rag_pipeline.py").read_text() == "# mine\n"
    assert "pipline" in result.stderr and "did you mean `pipeline`" in result.stderr
    again = CliRunner().invoke(main, ["init", str(tmp_path)])
    assert all(f"kept: {tmp_path / relative}" in again.stdout for relative in FILES)


def test_init_says_how_to_pin_the_action_until_a_release_exists(tmp_path):
    result = CliRunner().invoke(main, ["init", str(tmp_path)])
    assert result.exit_code == 0, result.output
    workflow = tmp_path / ".github" / "workflows" / "rag-gate.yml"
    (note,) = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert note == (
        f"note: {workflow}: uses rag-gate/rag-gate@v1, which works once rag-gate has a v1 release; until then "
        "replace each `rag-gate/rag-gate@v1` with a commit of https://github.com/rag-gate/rag-gate: "
        "rag-gate/rag-gate@<commit sha> (README: The workflow)"
    )
    # the workflow says the same where the user edits it, and README says it (one instruction, three places)
    text = workflow.read_text()
    assert text.count("rag-gate/rag-gate@v1     # no release yet: pin a commit sha") == 1
    assert text.count("rag-gate/rag-gate@v1   # no release yet: pin a commit sha") == 1
    assert "replace both `rag-gate/rag-gate@v1` below with a commit sha" in text
    readme = (REPO / "README.md").read_text()
    assert "replace `rag-gate/rag-gate@v1` with a commit sha of this repository" in readme
    # a workflow pinned by the user: nothing to say
    workflow.write_text(text.replace("rag-gate/rag-gate@v1", "rag-gate/rag-gate@" + "a" * 40))
    again = CliRunner().invoke(main, ["init", str(tmp_path)])
    assert again.exit_code == 0 and "note:" not in again.stderr


def test_pin_advice_names_the_installed_commit_of_rag_gate_s_repository(tmp_path):
    from gate.scaffold import installed_commit, pin_advice, scaffold

    sha = "0123456789abcdef0123456789abcdef01234567"

    def direct_url(url, commit=sha):  # what pip writes for `pip install "rag-gate @ git+URL@REV"` (PEP 610)
        return json.dumps({"url": url, "vcs_info": {"vcs": "git", "commit_id": commit, "requested_revision": "main"}})

    assert installed_commit(direct_url("https://github.com/rag-gate/rag-gate")) == sha
    assert installed_commit(direct_url("https://github.com/rag-gate/rag-gate.git")) == sha
    assert installed_commit(direct_url("ssh://git@github.com/rag-gate/rag-gate.git")) == sha
    assert installed_commit(direct_url("https://github.com/someone/fork")) is None  # not the action's repository
    assert installed_commit(direct_url("https://github.com/rag-gate/rag-gate", "main")) is None
    assert installed_commit('{"url": "file:///src/rag-gate", "dir_info": {"editable": true}}') is None
    assert installed_commit(None) is None and installed_commit("not json") is None
    scaffold(tmp_path)
    advice = pin_advice(
        tmp_path / ".github" / "workflows" / "rag-gate.yml", direct_url("https://github.com/rag-gate/rag-gate")
    )
    assert advice is not None and advice.endswith(
        f": rag-gate/rag-gate@{sha} (the commit installed here) (README: The workflow)"
    )
