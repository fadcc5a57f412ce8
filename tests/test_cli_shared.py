"""The helpers every command shares (attnlab._cli): one-line errors, cores, paths."""

from __future__ import annotations

import pytest

from attnlab._cli import OneLineParser, file_in_the_way, is_inside, usable_cores


def test_errors_are_one_line_without_usage(capsys):
    parser = OneLineParser(prog="python -m attnlab.x")
    parser.add_argument("--n", type=int)
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--n", "two"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("python -m attnlab.x: error: argument --n")


def test_is_inside_resolves_dot_dot_and_links(tmp_path):
    (tmp_path / "subs" / "alice").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "subs")
    assert is_inside(tmp_path / "subs", tmp_path / "subs")
    assert is_inside(tmp_path / "link" / "alice" / "grades.csv", tmp_path / "subs")
    assert not is_inside(tmp_path / "subs" / ".." / "grades.csv", tmp_path / "subs")
    assert not is_inside(tmp_path / "subs2", tmp_path / "subs")  # a prefix is not a parent


def test_file_in_the_way_finds_a_file_among_the_parents(tmp_path):
    (tmp_path / "f").write_text("")
    assert file_in_the_way(tmp_path / "f" / "deeper" / "out.csv") == tmp_path / "f"
    assert file_in_the_way(tmp_path / "new" / "out.csv") is None


def test_usable_cores_is_positive():
    assert usable_cores() >= 1


def test_out_folder_refuses_an_empty_name_a_file_and_a_path_below_a_file(tmp_path, capsys):
    from attnlab._cli import out_folder

    (tmp_path / "f").write_text("x")
    for text, message in [(" ", "empty string"), (str(tmp_path / "f"), "is a file"),
                          (str(tmp_path / "f" / "sub"), "cannot be created")]:  # fmt: skip
        with pytest.raises(SystemExit) as stop:
            out_folder("prog", text)
        assert stop.value.code == 2 and message in capsys.readouterr().err
    assert out_folder("prog", str(tmp_path / "new")) == tmp_path / "new"
