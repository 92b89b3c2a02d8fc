"""The README results block is regenerated from REPORT.md."""

import pytest

from experiments import suite


def test_update_readme_replaces_only_the_marked_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# top\n\nintro\n{suite.BEGIN}\nold table\n{suite.END}\n\n## after\n")
    report = tmp_path / "REPORT.md"
    report.write_text("# jaxlab results (quick preset)\n\n## bco\n\n| metric | value |\n")
    suite.update_readme(str(report), str(readme))
    text = readme.read_text()
    assert "old table" not in text and "intro" in text and "## after" in text
    assert "### jaxlab results (quick preset)" in text and "#### bco" in text
    readme.write_text("no markers")
    with pytest.raises(ValueError, match="markers"):
        suite.update_readme(str(report), str(readme))
