"""data/bugs/js_mutations.py and languages.py: the rules injector's bugs in JavaScript and
TypeScript, one operator at a time on small sources written here, and the dispatch by extension
that the injector and a repository's sources (repository.py) go through."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from data.bugs import js_mutations
from data.bugs.injector import candidates
from data.bugs.languages import is_test_file, language_of, sites
from data.bugs.mutations import OPERATORS, apply_all, choose
from data.bugs.repository import _is_js_test, _is_source
from data.git.diffs import JS_EXTENSIONS
from data.schema import Instance

SOURCE = """\
'use strict';
// a < b in a comment is not code
function window(items, size) {
  const out = [];
  for (let i = 0; i < items.length; i += size) {
    if (i + size <= items.length && size > 0) {
      out.push(items.slice(i, i + size));
    }
  }
  const total = 0.5, label = "n=" + size;
  let verbose = true;
  log(out); count++;
  return out;
}
"""


def _parses(path: str, source: str) -> bool:
    grammar = js_mutations.grammar_of(path)
    assert grammar is not None
    return not js_mutations._tree(grammar, source).root_node.has_error


def _one(operator: str, before: str, path: str = "lib/window.js", source: str = SOURCE) -> str:
    m = next(m for m in sites(path, source, (operator,)) if m.before == before)
    return m.apply(source)


@pytest.mark.parametrize(
    ("operator", "before", "line_after"),
    [
        ("binop", "+", "    if (i - size <= items.length && size > 0) {"),
        ("compare", "<=", "    if (i + size < items.length && size > 0) {"),
        ("boolop", "&&", "    if (i + size <= items.length || size > 0) {"),
        ("invert_if", "i + size <= items.length && size > 0", "    if (!(i + size <= items.length && size > 0)) {"),
        ("off_by_one", "0", "  for (let i = 1; i < items.length; i += size) {"),
        ("constant", "0.5", '  const total = 1.5, label = "n=" + size;'),
        ("constant", "true", "  let verbose = false;"),
        ("swap_args", "i, i + size", "      out.push(items.slice(i + size, i));"),
        ("drop_return", "return out", "  return;"),
        ("drop_stmt", " count++;", "  log(out);"),
    ],
)
def test_each_operator_changes_one_line_and_still_parses(operator, before, line_after):
    mutated = _one(operator, before)
    changed = [(a, b) for a, b in zip(SOURCE.splitlines(), mutated.splitlines(), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1] == line_after, changed
    assert _parses("lib/window.js", mutated)


def test_a_statement_alone_on_its_line_is_dropped_with_the_line_and_directives_stay():
    src = "function f(a) {\n  'use strict';\n  a.x = 1;\n  g(a);\n}\n"
    drops = sites("f.js", src, ("drop_stmt",))
    assert [m.before for m in drops] == ["  a.x = 1;\n", "  g(a);\n"]
    assert drops[0].apply(src) == "function f(a) {\n  'use strict';\n  g(a);\n}\n"


def test_comparisons_invert_and_loop_bounds():
    src = "if (a === b) f(x != y);\nwhile (!done) step();\nconst v = ok ? 1.25 : s.at(-1);\nfor (;;) {}\n"
    src += "do { if (!(i % 2)) i--; } while (!(i > 0));\nconst w = !(a || b) ? 1 : 2;\n"
    swaps = {(m.operator, m.before, m.after) for m in sites("m.mjs", src)}
    assert {("compare", "===", "!=="), ("compare", "!=", "==")} <= swaps
    assert {("invert_if", "a === b", "!(a === b)"), ("invert_if", "!done", "done"), ("invert_if", "ok", "!ok")} <= swaps
    assert {("invert_if", "!(i % 2)", "i % 2"), ("invert_if", "!(i > 0)", "i > 0")} <= swaps
    assert ("invert_if", "!(a || b)", "(a || b)") in swaps  # a ternary's condition keeps its parentheses
    assert ("constant", "1.25", "2.25") in swaps
    assert not any(m.operator == "off_by_one" for m in sites("m.mjs", src))  # -1 is no literal; for(;;) has none


def test_typescript_types_are_not_code_and_tsx_reads_jsx():
    src = "type Half = 0.5;\nexport const f = (a: number, b: Array<number>): boolean => a < b.length && b[0] > 1.5;\n"
    found = {(m.operator, m.before) for m in sites("src/f.ts", src)}
    assert ("constant", "0.5") not in found and ("constant", "1.5") in found
    assert {("compare", "<"), ("compare", ">"), ("boolop", "&&"), ("off_by_one", "0")} <= found
    assert sites("src/f.d.ts", src) == [] and language_of("src/f.d.ts") is None
    jsx = "export function A({x}) {\n  return <div title={x < 1 ? 'a' : 'b'}>{x && <b/>}</div>;\n}\n"
    found_tsx = sites("src/A.tsx", jsx)
    assert {("compare", "<"), ("boolop", "&&")} <= {(m.operator, m.before) for m in found_tsx}
    assert all(_parses("src/A.tsx", m.apply(jsx)) for m in found_tsx)


def test_sites_are_sorted_deterministic_and_never_in_tests_comments_or_broken_sources():
    found = sites("lib/window.js", SOURCE)
    assert found == sites("lib/window.js", SOURCE) and set(Counter(m.operator for m in found)) == set(OPERATORS)
    assert [m.start for m in found] == sorted(m.start for m in found) and all(m.line not in (1, 2) for m in found)
    assert not any(m.before == "+" and m.line == 10 for m in found)  # "n=" + size: no string minus
    for path in ("test/window.js", "src/__tests__/w.js", "w.test.js", "w.spec.ts", "src/__mocks__/fs.js"):
        assert is_test_file(path) and sites(path, SOURCE) == []
    assert sites("lib/broken.js", "function f( {\n") == [] and sites("README.md", SOURCE) == []
    assert language_of("a.py") == "python" and language_of("a.cts") == "javascript"
    assert set(js_mutations.GRAMMARS) == JS_EXTENSIONS


def test_offsets_are_characters_past_non_ascii_text():
    src = "const s = 'héllo → wörld';\nif (a < b) f(x, y);\n"
    for m in sites("u.js", src):
        assert src[m.start : m.end] == m.before and _parses("u.js", m.apply(src))
    assert _one("compare", "<", "u.js", src).splitlines()[1] == "if (a <= b) f(x, y);"


def test_choose_is_seeded_and_combined_bugs_apply_together():
    found = sites("lib/window.js", SOURCE)
    bug = choose(found, 3, seed=7)
    assert bug == choose(found, 3, seed=7) and bug != choose(found, 3, seed=8)
    assert len(bug) == 3 and all(a.end <= b.start for a, b in itertools.pairwise(bug))
    assert _parses("lib/window.js", apply_all(SOURCE, bug))


def test_the_injector_draws_javascript_and_python_by_extension():
    inst = Instance(
        instance_id="acme__w-1",
        repo="acme/w",
        base_commit="0" * 40,
        problem_statement="",
        patch="",
        test_patch="",
        code_context={"lib/window.js": SOURCE, "test/window.test.js": SOURCE, "README.md": "a < b\n"},
        oracle_new_content={},
        created_at="2024-01-01T00:00:00Z",
    )
    drawn = candidates(inst, 4, 1, seed=0, operators=OPERATORS)
    assert len(drawn) == 4 and drawn == candidates(inst, 4, 1, seed=0, operators=OPERATORS)
    assert {m.path for c in drawn for m in c.bug} == {"lib/window.js"}


@pytest.mark.parametrize(
    ("path", "test", "source"),
    [
        ("lib/router.js", False, True),
        ("src/index.ts", False, True),
        ("src/types.d.ts", False, False),
        ("test/app.router.js", True, False),
        ("test/acceptance/auth.js", True, False),
        ("src/__tests__/Button.tsx", True, False),
        ("src/util.test.ts", True, False),
        ("packages/a/src/x.spec.mjs", True, False),
        ("test/support/utils.js", False, False),
        ("test/fixtures/app.js", False, False),
        ("test/setup.js", False, False),
        ("dist/index.js", False, False),
        ("node_modules/x/index.js", False, False),
        ("jest.config.js", False, False),
        ("examples/hello/index.js", False, False),
        ("lib/calc.py", False, False),
    ],
)
def test_a_javascript_repository_s_tests_and_sources(path, test, source):
    assert _is_js_test(path) is test
    assert _is_source(path, (), "javascript") is source
    assert not _is_source(path, (), "python") or path.endswith(".py")
