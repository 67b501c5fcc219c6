"""Single definitions of a (synthetic) release run with the study's stand-ins: what resolves, what is missing,
what a test of the platform decides, and which statements a backward slice keeps."""

from __future__ import annotations

import ast
import textwrap
import types

import pytest

from repro_studies.upstream.released_code import (
    ClassRef,
    ImportFailure,
    Missing,
    NotProvided,
    ReleasedCode,
    ReleasedDefaults,
    backward_slice,
    statement_binding,
)

SOURCES = {
    "vllm/models/toy/__init__.py": """
        from vllm.platforms import current_platform

        if current_platform.is_rocm():
            from .amd.model import ToyForCausalLM
        else:
            from .nvidia.model import ToyForCausalLM
    """,
    "vllm/models/toy/nvidia/model.py": """
        from vllm.heavy.decorators import support_torch_compile
        from vllm.models.toy.attention import FastAttention, PlainAttention
        from vllm.platforms import current_platform

        @support_torch_compile
        class ToyForCausalLM:
            pass

        def _select_attn_cls(config):
            if config.backend is not None:
                return PlainAttention
            if current_platform.get_device_capability()[0] == 10 and FastAttention.is_available_for(config):
                return FastAttention
            return PlainAttention
    """,
    "vllm/models/toy/attention.py": """
        from vllm.heavy.layers import Module

        RECORD = 584

        class PlainAttention(Module):
            packed = "fp8"

            def __init__(self, config):
                self.kv_mxfp8 = config.mxfp8
                unused = config.never_read
                self.record = 528 if self.kv_mxfp8 else RECORD

            @property
            def name(self):
                return "plain:" + self.packed

        class FastAttention(PlainAttention):
            packed = "nvfp4"

            @classmethod
            def is_available_for(cls, config):
                return config.heads % 8 == 0
    """,
    "vllm/config/cache.py": """
        from dataclasses import field

        class CacheConfig:
            cache_dtype: str = "auto"
            sizes: list = field(default_factory=lambda: [1, 2])
    """,
    "vllm/ops/gather.py": """
        import cutlass

        def gather():
            return "cute"
    """,
}


def release(**standins):
    sources = {k: textwrap.dedent(v) for k, v in SOURCES.items()}
    code = ReleasedCode(sources.__getitem__, sources, label="vLLM 9.9.9")
    code.standins.update(standins)
    return code


def platform(rocm=False, major=9):
    return types.SimpleNamespace(is_rocm=lambda: rocm, get_device_capability=lambda: (major, 0))


def test_a_module_runs_whole_only_when_its_top_level_can_run():
    code = release(**{"vllm.platforms.current_platform": platform()})
    assert code.module_namespace("vllm/config/cache.py") is not None
    assert code.module_namespace("vllm/models/toy/nvidia/model.py") is None  # the missing decorator is called
    assert "support_torch_compile" in code.not_executed["vllm/models/toy/nvidia/model.py"]


@pytest.mark.parametrize(
    ("rocm", "module"), [(False, "vllm.models.toy.nvidia.model"), (True, "vllm.models.toy.amd.model")]
)
def test_the_package_init_takes_the_branch_the_platform_picks(rocm, module):
    code = release(**{"vllm.platforms.current_platform": platform(rocm=rocm)})
    assert (module, "ToyForCausalLM") in code.taken_imports("vllm/models/toy/__init__.py")


@pytest.mark.parametrize(
    ("major", "heads", "chosen"), [(10, 64, "FastAttention"), (10, 12, "PlainAttention"), (9, 64, "PlainAttention")]
)
def test_a_selector_runs_as_released_with_the_platform_as_its_only_stand_in(major, heads, chosen):
    code = release(**{"vllm.platforms.current_platform": platform(major=major)})
    select = code.function("vllm/models/toy/nvidia/model.py", "_select_attn_cls")
    result = select(types.SimpleNamespace(backend=None, heads=heads))
    assert isinstance(result, ClassRef) and result.__name__ == chosen
    assert select.released_location.member == "vllm/models/toy/nvidia/model.py"


def test_a_released_instance_reads_properties_through_the_bases():
    code = release()
    fast = code.value("vllm/models/toy/attention.py", "FastAttention")
    assert fast.instance().name == "plain:nvfp4"  # the base's property, the subclass's class attribute
    assert fast.is_subclass_of("PlainAttention") and isinstance(
        fast.instance(), code.value("vllm/models/toy/attention.py", "PlainAttention")
    )


def test_missing_names_fail_only_when_used_and_say_which():
    code = release()
    module = code.value("vllm/models/toy/attention.py", "Module")
    assert isinstance(module, Missing) and not isinstance(object(), module)
    with pytest.raises(NotProvided, match=r"vllm\.heavy\.layers\.Module was called"):
        module()
    with pytest.raises(NotProvided, match="was tested"):
        bool(module.anything)


def test_a_backward_slice_runs_only_the_statements_a_target_needs():
    code = release()
    cls = code.class_ref("vllm/models/toy/attention.py", "PlainAttention")
    init = cls.own("__init__")
    target = statement_binding(init.body, "self.record")
    kept = backward_slice(init.body, target)
    assert [ast.unparse(s) for s in kept] == [
        "self.kv_mxfp8 = config.mxfp8",
        "self.record = 528 if self.kv_mxfp8 else RECORD",
    ]
    local = {"self": types.SimpleNamespace(), "config": types.SimpleNamespace(mxfp8=False)}
    for stmt in kept:
        code.execute(cls._member, stmt, local)
    assert local["self"].record == 584


def test_config_defaults_come_from_the_release_class_body():
    code = release()
    cfg = ReleasedDefaults(code, "vllm/config/cache.py", "CacheConfig", block_size=256)
    assert (cfg.block_size, cfg.cache_dtype, cfg.sizes) == (256, "auto", [1, 2])
    with pytest.raises(AttributeError, match="declares no default for 'nothing'"):
        _ = cfg.nothing


def test_an_import_the_platform_cannot_make_propagates_as_in_vllm():
    failing = ImportFailure(ImportError("libcuda.so.1: cannot open shared object file"))
    code = release(cutlass=failing)
    with pytest.raises(ImportError, match="libcuda"):
        code.value("vllm/ops/gather.py", "gather")
    code = release(cutlass=types.ModuleType("cutlass"))
    assert code.value("vllm/ops/gather.py", "gather")() == "cute"


# ---- what the bug-1 chain relies on ------------------------------------------------------------------------------

CHAIN_SOURCES = {
    "vllm/lib.py": """
        class Heavy:
            def __init__(self, n):
                self.n = n

        def total(xs):
            return sum(xs)
    """,
    "vllm/user.py": """
        from vllm.lib import Heavy, total

        def build(n):
            return Heavy(n)

        def sizes(local_factor):
            pass
    """,
}


def chain_code() -> ReleasedCode:
    sources = {m: textwrap.dedent(s).lstrip() for m, s in CHAIN_SOURCES.items()}
    return ReleasedCode(sources.__getitem__, sources, label="vLLM 9.9.9")


def test_a_released_class_is_constructed_by_the_studys_constructor_or_not_at_all():
    code = chain_code()
    heavy = code.class_ref("vllm/lib.py", "Heavy")
    with pytest.raises(NotProvided, match="no constructor"):
        heavy(3)
    code.constructor = lambda cls, args, kwargs: ("built", cls.__name__, args)
    assert heavy(3) == ("built", "Heavy", (3,))
    assert (heavy.__module__, heavy.__qualname__) == ("vllm.lib", "Heavy")


def test_a_stand_in_wins_over_the_name_a_module_imported_from_it_even_after_the_module_ran():
    code = chain_code()
    assert code.function("vllm/user.py", "build")(2).n == 2  # the released class, run whole
    code.standins["vllm.lib.total"] = lambda xs: "stand-in"
    assert code.value("vllm/user.py", "total")([1, 2]) == "stand-in"


def test_a_statement_sees_its_locals_in_a_comprehension():
    code = chain_code()
    stmt = ast.parse("out = [x * factor for x in xs]").body[0]
    local = code.execute("vllm/user.py", stmt, {"xs": [1, 2], "factor": 3})
    assert local["out"] == [3, 6]
    assert code.execute("vllm/user.py", stmt, {"xs": [4], "factor": 2})["out"] == [8]  # compiled once, run again
