"""The agent's turn parser: each action kind, how fences are recognised, and every format error."""

import pytest

from actors.agent.actions import Action, parse_turn


def edit(path: str, search: str, replace: str, fence: str = "```python") -> str:
    return f"{fence}\n### {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```"


def test_a_bash_block_is_one_command_stripped():
    assert parse_turn("Let me look around.\n```bash\n  ls -la src \n```\nThen I will read it.") == Action(
        kind="bash", command="ls -la src"
    )


def test_sh_fences_and_whitespace_around_fence_lines_are_accepted():
    text = "  ```sh  \ncd src && \\\n  grep -rn foo .\n  ```  "
    assert parse_turn(text) == Action(kind="bash", command="cd src && \\\n  grep -rn foo .")


def test_edit_blocks_are_grouped_by_path_in_order():
    text = "Two fixes.\n" + "\n".join(
        [edit("b.py", "x = 1", "x = 2"), edit("a.py", "", "new"), edit("b.py", "y", "z", fence="```")]
    )
    action = parse_turn(text)
    assert action == Action(kind="edit", edits={"b.py": [("x = 1", "x = 2"), ("y", "z")], "a.py": [("", "new")]})
    assert list(action.edits) == ["b.py", "a.py"]


def test_unsafe_paths_are_left_for_the_episode_to_refuse():
    assert parse_turn(edit("../etc/passwd", "", "x")).edits == {"../etc/passwd": [("", "x")]}


def test_a_bash_fence_inside_an_edit_is_text_of_the_edit():
    # Editing a Markdown file whose text holds a bash block: one edit, no command.
    readme = "Install:\n```bash\npip install .\n```"
    action = parse_turn(edit("README.md", readme, readme.replace("pip", "uv pip"), fence="```markdown"))
    assert action.kind == "edit"
    assert action.edits == {"README.md": [(readme, readme.replace("pip", "uv pip"))]}


def test_an_empty_submit_block_submits():
    assert parse_turn("The tests pass now.\n```submit\n```") == Action(kind="submit")
    assert parse_turn("```submit\n   \n```") == Action(kind="submit")


def test_other_languages_blocks_and_inline_fences_are_not_actions():
    text = "The bug is here:\n```python\ndef f():\n    return 1\n```\nrun ```ls``` to see\n```bash\npytest -x\n```"
    assert parse_turn(text) == Action(kind="bash", command="pytest -x")


def test_a_bash_fence_inside_another_block_is_not_a_command():
    # Markdown: the ```text block runs to its first closing line, so ```bash is its body.
    assert parse_turn("```text\n```bash\nls\n```\n").kind == "invalid"


@pytest.mark.parametrize("opening", ["```bash -x", "```Bash", "```shell", "``` bash"])
def test_the_bash_fence_line_must_be_exact(opening):
    action = parse_turn(f"{opening}\nls\n```")
    assert (action.kind, action.error.split(":")[0]) == ("invalid", "no action")


@pytest.mark.parametrize(
    "text, error",
    [
        ("I think the bug is in parse().", "no action: end the turn with a ```bash block"),
        ("", "no action: end the turn with a ```bash block"),
        ("```bash\nls\n```\n```bash\npwd\n```", "2 bash blocks: run one command per turn"),
        ("```submit\n```\n```submit\n```", "2 submit blocks: submit once"),
        ("```bash\nls\n```\n" + edit("a.py", "x", "y"), "a bash block and edit blocks: one kind of action per turn"),
        ("```bash\nls\n```\n```submit\n```", "a bash block and a submit block: one kind of action per turn"),
        (edit("a.py", "x", "y") + "\n```submit\n```", "a submit block and edit blocks: apply the edits first"),
        ("```bash\n  \n```", "the bash block is empty"),
        ("```bash\nls\n", "the bash block is not closed (a line ``` ends it)"),
        ("```submit\nI am done\n```", "the submit block must be empty"),
        ("```submit\n", "the submit block is not closed (a line ``` ends it)"),
        ("```python\n### a.py\n<<<<<<< SEARCH\nx\n>>>>>>> REPLACE\n```", "a SEARCH/REPLACE block is malformed"),
        # A malformed block beside a good one is not dropped silently.
        (
            edit("a.py", "x", "y") + "\n```\n### b.py\n<<<<<<< SEARCH\nx\n=======\ny\n```",
            "a SEARCH/REPLACE block is malformed",
        ),
        # A malformed edit still counts as an edit beside a command.
        ("```bash\nls\n```\n### a.py\n<<<<<<< SEARCH\n", "a bash block and edit blocks"),
    ],
)
def test_format_errors_say_which(text, error):
    action = parse_turn(text)
    assert (action.kind, action.command, action.edits) == ("invalid", "", {})
    assert action.error.startswith(error), action.error


def test_a_search_marker_inside_a_command_is_not_a_malformed_edit():
    assert parse_turn('```bash\ngrep -rn "<<<<<<< SEARCH" .\n```') == Action(
        kind="bash", command='grep -rn "<<<<<<< SEARCH" .'
    )
