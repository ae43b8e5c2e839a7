"""`omnitts-scaffold new` writes the reference adapter's skeleton beside the model's tests (outside the vllm_omni
package: it runs in the reference's environment, not the engine's), one per pattern; it loads with the capture's
own loader and says what to fill in. `remove` takes it away with the rest (tests/scaffold/test_remove.py)."""

from __future__ import annotations

import pytest

from omnitts.scaffold.cli import main
from omnitts.validators.parity.adapter import Request, load_adapter


@pytest.mark.parametrize("pattern", ["two-stage", "native-ar"])
def test_new_writes_a_loadable_adapter_skeleton(work_tree, pattern):
    root = work_tree("0.22.0")
    name = f"skel_{pattern.replace('-', '_')}"
    assert main(["new", name, "--pattern", pattern, "--target", str(root)]) == 0
    path = root / "tests" / "model_executor" / "models" / name / "reference_adapter.py"
    assert path.is_file()
    camel = "".join(part.capitalize() for part in name.split("_"))
    cls = load_adapter(f"{path}:{camel}Reference")
    assert cls.output == ("latents" if pattern == "native-ar" else "codes")
    with pytest.raises(NotImplementedError, match="load the reference implementation"):
        cls.from_checkpoint(root)
    adapter = cls(model=None, dtype="float32", device="cpu")
    with pytest.raises(NotImplementedError, match="generate call"):
        adapter.generate(Request("r0", "hello"))
    assert main(["remove", name, "--target", str(root)]) == 0
    assert not path.exists()


def test_load_adapter_refuses_what_is_not_an_adapter(tmp_path):
    (tmp_path / "a.py").write_text("class NotOne:\n    pass\n")
    with pytest.raises(ValueError, match="not a ReferenceAdapter subclass"):
        load_adapter(f"{tmp_path / 'a.py'}:NotOne")
    with pytest.raises(ValueError, match="expected module:Class"):
        load_adapter("no_colon")
    with pytest.raises(ValueError, match="no such file"):
        load_adapter(f"{tmp_path / 'missing.py'}:X")
