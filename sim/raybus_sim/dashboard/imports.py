"""Which Serve `import_path`s the simulated head can import (README §8).

A real head imports the app in a worker: any module that is neither in the app's working_dir nor
installed ends DEPLOY_FAILED with ModuleNotFoundError (not only names that look broken). The sim
cannot see user code, so it knows a set of importable top-level modules: those of the KubeRay
samples and of the captures, plus whatever a test adds (`ClusterSettings.importable_modules`, or
`"*"` for "everything imports"). Conventions kept from the captures: `<module>:no_such_attr`
fails at import with AttributeError, an import path containing `broken` imports but its
constructor raises (DEPLOY_FAILED after deploying, route kept).
"""

from __future__ import annotations

# Top-level modules of every import_path in the KubeRay samples and the Ray 2.60 captures.
DEFAULT_IMPORTABLE_MODULES = frozenset({
    "hello",  # captures (hello:app, hello:composed, hello:broken_ctor, hello:flaky)
    "fruit", "conditional_dag", "ray", "stable_diffusion", "text_summarizer", "ray-operator",
    "text_ml", "mobilenet", "microbenchmarks",  # KubeRay samples / docs
})


def _split(import_path: str) -> tuple[str, str]:
    """"pkg.mod:attr" or "pkg.mod.attr" -> ("pkg.mod", "attr")."""
    if ":" in import_path:
        module, _, attr = import_path.partition(":")
        return module, attr
    module, _, attr = import_path.rpartition(".")
    return module, attr


def missing_module(import_path: str, importable: frozenset[str]) -> str | None:
    """The module a ModuleNotFoundError would name, or None if the module imports."""
    module, _ = _split(import_path)
    top = module.split(".", 1)[0]
    if "*" in importable or top in importable:
        return None
    return top


def failure(import_path: str, importable: frozenset[str]) -> str | None:
    """"import" (module or attribute missing), "ctor" (constructor raises) or None."""
    if missing_module(import_path, importable) is not None:
        return "import"
    if _split(import_path)[1] == "no_such_attr":
        return "import"
    if "broken" in import_path:
        return "ctor"
    return None
