"""The include/ folder's files a plan renders from (tpu_rl.include_files): looked for in the
current folder, beside plugins/ in a clone, then in Composer's data folder. The plan's own use
of them is tests/unit/test_plan.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_rl import include_files


def test_the_current_folder_comes_first_then_the_clone_then_composer(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dirs = include_files.include_dirs()
    assert dirs[0] == tmp_path / "include"
    assert dirs[-1] == include_files.COMPOSER_INCLUDE
    clone = Path(include_files.__file__).resolve().parents[2] / "include"
    assert dirs[1] == clone and (clone / include_files.PLAN_BLUEPRINT).is_file()


def test_a_folder_is_listed_once_when_the_current_one_is_the_clone(monkeypatch):
    clone = Path(include_files.__file__).resolve().parents[2]
    monkeypatch.chdir(clone)
    dirs = include_files.include_dirs()
    assert dirs == [clone / "include", include_files.COMPOSER_INCLUDE]


def test_the_first_folder_holding_the_file_wins(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        (folder / "cluster-toolkit").mkdir(parents=True)
        (folder / include_files.PLAN_KUEUE_CONFIG).write_text(folder.name)
    (tmp_path / "none").mkdir()
    monkeypatch.setattr(include_files, "include_dirs", lambda: [tmp_path / "none", first, second])
    found = include_files.include_file(include_files.PLAN_KUEUE_CONFIG)
    assert found == first / include_files.PLAN_KUEUE_CONFIG and found.read_text() == "a"


def test_a_file_in_no_folder_names_every_place_looked(tmp_path, monkeypatch):
    monkeypatch.setattr(include_files, "include_dirs", lambda: [tmp_path / "a", tmp_path / "b"])
    with pytest.raises(FileNotFoundError) as missing:
        include_files.include_file(include_files.PLAN_BLUEPRINT)
    message = str(missing.value)
    assert message.startswith("include/cluster-toolkit/blueprint.yaml not found")
    assert str(tmp_path / "a" / include_files.PLAN_BLUEPRINT) in message
    assert str(tmp_path / "b" / include_files.PLAN_BLUEPRINT) in message
