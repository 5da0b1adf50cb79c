"""One sanitizer for every line rag-gate prints: gate.sanitize and the outputs that use it.

Three kinds of fault, each tested on the functions and through the real CLI:
- untrusted text starting a GitHub workflow-command line (``::error``, ``::add-mask::``, legacy ``##[``) in
  rag-gate's own stdout/stderr;
- unencodable text (lone surrogates) crashing an output path after the verdict;
- control and invisible format characters reaching the comment, the text output and printed lines.
"""

import io
import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

from click.testing import CliRunner
from helpers import write_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.cli import main
from gate.errors import InputError, located
from gate.outputs.annotations import annotation, escape_data
from gate.outputs.escape import WORD_JOINER, code_block, escape_markdown
from gate.outputs.text import plain
from gate.sanitize import (
    INVISIBLE,
    GuardedStream,
    WorkflowCommand,
    clean,
    encodable,
    neutralize_line,
    one_line,
    print_line,
)

PAYLOAD = (
    "lookup failed\n::error title=rag-gate: pass::all cases passed\n  ::add-mask::Arlen\r::warning::after a CR"
    " ##[error]legacy \ud83d \x00\x07\x08\x1b[2K\x1b]8;;https://x.test\x07link\x1b]8;;\x07 \x85\x9b"
    " \u034f\u061c\u115f\u1160\u3164\u180e\u200b\u202e\u2066\ufeff\U000e0041\U000e0042\ufe0f\U000e0100 end"
)
"""Untrusted text holding every kind at once: workflow commands after LF, CR and spaces, a legacy command, a lone
surrogate, C0/C1 controls (NUL, BEL, BS, ESC sequences, an OSC 8 hyperlink, NEL, CSI) and invisible characters."""

# Text of every kind: any code point (surrogates included), mixed with the dangerous fragments.
FRAGMENTS = st.sampled_from(["::", ":", "##[", "#", "[", "\n", "\r", "\r\n", " ", "\t", "\ud83d", "\udc00", "\x1b"])
ANY_CHAR = st.characters(exclude_categories=())
TEXT = st.lists(st.one_of(FRAGMENTS, st.text(ANY_CHAR, max_size=8)), max_size=12).map("".join)


def runner_lines(text: str) -> list[str]:
    """Lines as the GitHub Actions runner splits a log (CR, LF, CR LF)."""
    return re.split(r"\r\n|\r|\n", text)


def is_command(line: str) -> bool:
    """Would the runner process ``line`` as a workflow command (``::`` after leading spaces, or ``##[`` anywhere)?"""
    return line.lstrip().startswith("::") or "##[" in line


def hidden(text: str, allowed: str = "\n\t") -> set[str]:
    """Control (Cc), format (Cf), surrogate (Cs) and other invisible characters of ``text`` not in ``allowed``."""
    return {
        c
        for c in text
        if c not in allowed and (unicodedata.category(c) in ("Cc", "Cf", "Cs") or INVISIBLE.fullmatch(c))
    }


# --------------------------------------------------------------------------------------- the functions themselves


def test_invisible_covers_the_whole_format_category_and_the_default_ignorables():
    cf = [chr(cp) for cp in range(0x110000) if unicodedata.category(chr(cp)) == "Cf"]
    assert cf and all(INVISIBLE.fullmatch(c) for c in cf)
    # Default_Ignorable_Code_Point beyond Cf (Unicode DerivedCoreProperties.txt): CGJ, fillers, variation selectors
    for c in "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180f\u3164\ufe00\ufe0f\uffa0\U000e0000\U000e0100\U000e01ef":
        assert INVISIBLE.fullmatch(c), f"U+{ord(c):04X}"
    # visible text, the replacement character and ordinary whitespace stay
    for c in "aé中😀\ufffd \u00a0\u3000\n\t":
        assert not INVISIBLE.fullmatch(c), f"U+{ord(c):04X}"


def test_one_line_keeps_the_message_and_escapes_what_does_not_show():
    """A message shows hidden characters escaped, never deleted: ``a\\x01b`` is not ``ab``, U+202E is ``\\u202e``."""
    text = one_line(PAYLOAD)
    assert "\n" not in text and "\r" not in text
    assert text.startswith(r"lookup failed\n::error title=rag-gate: pass::all cases passed\n  ::add-mask::Arlen\r")
    assert r"legacy \ud83d \x00\x07\x08\x1b[2K\x1b]8;;https://x.test\x07link" in text
    assert r"\u180e\u200b\u202e\u2066\ufeff\U000e0041" in text and text.endswith(" end") and not hidden(text)
    assert one_line("a\x01b") == r"a\x01b" and one_line("50% of 10") == "50% of 10"  # % is not escaped: no command


def test_a_path_reads_the_same_in_every_part_of_a_message():
    """The path part (shown) and the message part (one_line) escape a newline alike: no ``%0A`` beside ``\\n``."""
    path = "d\nx.jsonl"
    message = located(path, 3, "id", f"{path}: changed while rag-gate was reading it")
    assert message == r"d\nx.jsonl:3: id: d\nx.jsonl: changed while rag-gate was reading it"
    assert InputError(f"{path}: file not found").lines() == [r"d\nx.jsonl: file not found"]


def test_clean_keeps_layout_newlines_and_drops_everything_hidden():
    text = clean("a\r\nb\rc\n\td\x00\x1b[1Ae\u2028f\ud83d\U000e0041")
    assert text == "a\nb\nc\n\td[1Ae f\ufffd"


def test_neutralize_line_breaks_both_command_syntaxes():
    assert neutralize_line("::error::x") == "%3A:error::x"
    assert neutralize_line("   ::add-mask::x") == "   %3A:add-mask::x"
    assert neutralize_line("see ##[warning]x and ##[error]y") == "see ##\\[warning]x and ##\\[error]y"
    assert neutralize_line("a :: b") == "a :: b"


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_one_line_and_clean_never_fail_and_hide_nothing(text):
    line = one_line(text)
    assert "\n" not in line and "\r" not in line and not hidden(line)
    line.encode("utf-8")
    cleaned = clean(text)
    assert "\r" not in cleaned and not hidden(cleaned)
    cleaned.encode("utf-8")
    assert encodable(text).encode("utf-8").decode("utf-8") == encodable(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, max_size=8))
def test_no_line_written_to_a_guarded_stream_is_a_workflow_command(chunks):
    """Written in any pieces (a ``:`` and ``:error`` in two writes, ``##`` and ``[``), nothing becomes a command."""
    raw = io.StringIO()
    stream = GuardedStream(raw)
    for chunk in chunks:
        assert stream.write(chunk) == len(chunk)
    out = raw.getvalue()
    out.encode("utf-8")
    assert not [line for line in runner_lines(out) if is_command(line)]
    assert not {c for c in out if unicodedata.category(c) == "Cc" and c not in "\n\r\t"}
    # nothing but the neutralizing escapes was added: removing them gives the input without controls/surrogates
    expected = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", "", encodable("".join(chunks)))

    def undo(text):
        return text.replace("%3A", ":").replace("##\\[", "##[")

    assert undo(out) == undo(expected)


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_print_line_passes_own_commands_and_guards_everything_else(text):
    raw = io.StringIO()
    old, sys.stdout = sys.stdout, GuardedStream(raw)
    try:
        print_line(text)
        print_line(annotation("error", text, title="rag-gate: case q1 regressed", file="golden.jsonl", line=3))
    finally:
        sys.stdout = old
    lines = runner_lines(raw.getvalue())
    commands = [line for line in lines if is_command(line)]
    assert len(commands) == 1 and commands[0].startswith("::error file=golden.jsonl,line=3,title=rag-gate%3A case")


def test_annotations_are_workflow_commands_with_escaped_clean_data():
    line = annotation("warning", PAYLOAD, title="rag-gate: t\n::x")
    assert isinstance(line, WorkflowCommand)
    assert len(runner_lines(line)) == 1 and line.startswith("::warning title=rag-gate%3A t%0A%3A%3Ax::lookup failed%0A")
    assert not hidden(line) and "\ufffd" in line
    assert escape_data("100%\r\n") == "100%25%0D%0A"


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_markdown_and_text_renderers_keep_no_hidden_character(text):
    for rendered in (escape_markdown(text, limit=10_000), plain(text, limit=10_000)):
        assert not hidden(rendered, allowed=WORD_JOINER)  # the word joiners escape_markdown puts after an @ or #
        rendered.encode("utf-8")
    block = code_block(text.split("\n"))
    assert not hidden(block, allowed="\n\t" + WORD_JOINER)
    block.encode("utf-8")


def test_error_listing_prints_one_line_per_problem():
    error = InputError.listing([located("rag-gate.yml", 3, "pipeline.options.mode\n::error::x", "unknown key")])
    assert error.lines() == [r"rag-gate.yml:3: pipeline.options.mode\n::error::x: unknown key"]
    assert InputError("a\nb").lines() == [r"a\nb"]


# ----------------------------------------------------------------------------------------------- through the CLI


def _compare_inputs(tmp_path, n=30, bad=15):
    """Golden set and two predictions files: head answers ``bad`` cases wrong with :data:`PAYLOAD` in them."""
    golden, base, head = [], [], []
    for i in range(n):
        question = f"When was town {i} founded?" + (f" {PAYLOAD}" if i == 1 else "")
        # a regressed case's id holds what shows but acts (ids with hidden characters are refused: test_validate.py)
        case_id, year = f"q{i:02d}" + (" ::error::x ##[error]y @user #12 <b>" if i == 0 else ""), str(1800 + i)
        golden.append({"id": case_id, "question": question, "expected_doc_ids": [f"d{i}"], "reference_answers": [year]})
        good = {
            "id": case_id,
            "answer": f"It was founded in {year}.",
            "latency_ms": 10.0,
            "retrieved": [{"id": f"d{i}", "text": f"founded in {year}"}],
        }
        bad_answer = {**good, "answer": f"Nobody knows. {PAYLOAD}", "retrieved": [{"id": "dX", "text": PAYLOAD}]}
        base.append(good)
        head.append(bad_answer if i < bad else good)
    for name, rows in (("golden", golden), ("base", base), ("head", head)):
        # json.dumps escapes the lone surrogate as \ud83d: valid JSON, as a JS service would write it
        write_jsonl(tmp_path / f"{name}.jsonl", rows)


def test_compare_with_untrusted_payload_prints_and_writes_safely(tmp_path):
    """A real process (real stdout and stderr, UTF-8): the verdict's exit code, nothing hidden, no command line."""
    _compare_inputs(tmp_path)
    for fmt in ("markdown", "text", "json"):
        out = tmp_path / f"out-{fmt}"
        done = subprocess.run(
            [sys.executable, "-m", "gate", "compare", "--golden", tmp_path / "golden.jsonl", "--format", fmt,
             tmp_path / "base.jsonl", tmp_path / "head.jsonl", "--out", out],
            capture_output=True, check=False, env={"PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "utf-8"},
        )  # fmt: skip
        stdout, stderr = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
        assert done.returncode == 1, stderr
        assert "verdict: fail" in stderr
        if fmt == "json":  # still JSON, the same value as report.json, though it holds "##[" (written ##\u005b)
            assert json.loads(stdout) == json.loads((out / "report.json").read_text(encoding="utf-8"))
            assert "##[error]legacy" in stdout.encode().decode("unicode_escape", "replace")
        else:
            assert "town 1 founded? lookup failed" in stdout
        assert not [line for line in runner_lines(stdout + stderr) if is_command(line)]
        assert not hidden(stdout, allowed="\n" + WORD_JOINER)
    comment = (tmp_path / "out-markdown" / "comment.md").read_text(encoding="utf-8")
    assert "Nobody knows" in comment and not hidden(comment, allowed="\n" + WORD_JOINER)
    report = json.loads((tmp_path / "out-markdown" / "report.json").read_text(encoding="utf-8"))
    assert report["verdict"] == "fail"


def test_compare_surrogates_do_not_crash_a_strict_stdout(tmp_path):
    """CliRunner's stdout encodes strictly, as a UTF-8 pipe does: the surrogate is replaced, the exit code is 1."""
    _compare_inputs(tmp_path)
    result = CliRunner().invoke(
        main,
        ["compare", "--golden", str(tmp_path / "golden.jsonl"), "--format", "markdown", "--junit",
         str(tmp_path / "junit.xml"), str(tmp_path / "base.jsonl"), str(tmp_path / "head.jsonl"),
         "--out", str(tmp_path / "out")],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "internal error" not in result.stderr and "\ufffd" in result.stdout
    assert not hidden((tmp_path / "junit.xml").read_text(encoding="utf-8"))


def test_run_prints_pipeline_errors_on_one_line(tmp_path, tiny_golden):
    (tmp_path / "rag.py").write_text(f"def answer(case, **kw):\n    raise ValueError({PAYLOAD!r})\n")
    (tmp_path / "rag-gate.yml").write_text("golden: golden.jsonl\npipeline: {python: 'rag:answer', retries: 0}\n")
    result = CliRunner().invoke(main, ["run", "--config", str(tmp_path / "rag-gate.yml"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 3, result.output
    assert r"lookup failed\n::error title=rag-gate: pass::all cases passed\n" in result.stderr
    assert not [line for line in runner_lines(result.stdout + result.stderr) if is_command(line)]
    assert not hidden(result.stderr, allowed="\n")


def test_config_key_with_newlines_is_reported_on_one_line(tmp_path, tiny_golden):
    key = "repeat\n::error title=rag-gate: pass::fine\n::add-mask::Arlen"
    (tmp_path / "rag-gate.yml").write_text(
        f"golden: golden.jsonl\npipeline: {{python: 'rag:answer'}}\n{json.dumps(key)}: 2\nother: 1\n"
    )
    result = CliRunner().invoke(main, ["run", "--config", str(tmp_path / "rag-gate.yml"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("rag-gate: error: ") and lines[1].startswith(str(tmp_path))
    assert r"repeat\n::error title=rag-gate: pass::fine\n::add-mask::Arlen: unknown key" in lines[0] + lines[1]
    assert not [line for line in runner_lines(result.stderr) if is_command(line)]


def test_golden_problems_from_validate_are_one_line_each(tmp_path):
    rows = [{"id": "a ::error::x", "question": "x"}, {"id": "a ::error::x", "question": "y\n::error::z"}]
    path = write_jsonl(tmp_path / "g.jsonl", rows)
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    assert not [line for line in runner_lines(result.stderr) if is_command(line)]
    assert f"{path}:2: id: duplicate id 'a ::error::x' (first on line 1)" in result.stderr.splitlines()


def test_error_in_the_job_summary_and_annotation_is_escaped(tmp_path):
    """``rag-gate pr``'s error report: the job summary holds the message escaped, the annotation is one command."""
    from gate.pr import github as gh
    from gate.pr.report import report_error
    from gate.redact import Redactor

    summary = tmp_path / "summary.md"
    context = gh.github_context({"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    emitted: list[str] = []
    error = InputError.listing([located("rag-gate.yml", 2, "golden", f"file not found: golden<img src=x>{PAYLOAD}")])
    report_error(error, context, emitted.append, Redactor())
    text = summary.read_text(encoding="utf-8")
    # the message's escape \n, its backslash escaped for markdown: it renders as \n
    assert r"rag-gate.yml:2: golden: file not found: golden&lt;img src=x&gt;lookup failed\\n::error" in text
    assert not hidden(text, allowed="\n" + WORD_JOINER) and "<img" not in text
    assert len(emitted) == 1 and isinstance(emitted[0], WorkflowCommand) and len(runner_lines(emitted[0])) == 1


def test_shown_escapes_every_hidden_character_of_a_name_and_keeps_the_rest():
    from gate.sanitize import shown

    assert shown("x\x01y") == "x\\x01y" and shown("a\tb\nc\rd") == "a\\tb\\nc\\rd"
    assert shown("doc\u200b-1\u202e") == "doc\\u200b-1\\u202e"  # zero-width space, right-to-left override
    assert shown("tag\U000e0041") == "tag\\U000e0041" and shown("x\x9by") == "x\\x9by"  # tag character, C1 CSI
    assert shown(os.fsdecode(b"caf\xe9.jsonl")) == "caf\\udce9.jsonl"  # a file name that is not UTF-8
    assert shown(Path("runs/é 1/ok")) == "runs/é 1/ok"  # printable text, spaces too, as typed
    assert shown("x\x01y") != shown("xy")


def test_a_reader_that_closes_the_pipe_does_not_change_the_exit_code(tmp_path):
    """``rag-gate compare | head -1``: the rest of stdout is dropped; the exit code is still the verdict's (1), not
    an internal error (3), and the report is written."""
    _compare_inputs(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "gate", "compare", "--golden", tmp_path / "golden.jsonl", "--format", "text",
         tmp_path / "base.jsonl", tmp_path / "head.jsonl", "--out", tmp_path / "out"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "utf-8"},
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before rag-gate prints anything
    stderr = process.stderr.read().decode("utf-8")
    assert process.wait(timeout=120) == 1, stderr
    assert "internal error" not in stderr and "BrokenPipe" not in stderr and "verdict: fail" in stderr
    assert json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))["verdict"] == "fail"
