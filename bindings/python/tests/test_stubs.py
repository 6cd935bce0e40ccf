"""The hand-written stub lists exactly the public surface of the package."""

import ast
import os

import weir

STUB = os.path.join(os.path.dirname(weir.__file__), "__init__.pyi")


def stub_tree():
    with open(STUB) as f:
        return ast.parse(f.read())


def test_all_matches():
    tree = stub_tree()
    stub_all = next(
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "__all__"
    )
    assert sorted(stub_all) == sorted(weir.__all__)
    for name in weir.__all__:
        assert hasattr(weir, name), name


def test_class_members_match():
    classes = {n.name: n for n in stub_tree().body if isinstance(n, ast.ClassDef)}

    def declared(node):
        """Public members the stub gives a class, those of its stub-only bases included."""
        own = {
            n.name for n in node.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
        } | {
            n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        }
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                own |= declared(classes[base.id])
        return own

    for name, node in classes.items():
        if name not in weir.__all__:
            continue
        cls = getattr(weir, name)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            continue  # its attributes are set per instance
        public = {a for a in dir(cls) if not a.startswith("_")}
        assert declared(node) == public, name


def test_signatures_show_the_contract_defaults():
    import inspect

    assert str(inspect.signature(weir.LeakyBucket)) == "(rate, per, burst, delay=0, nodelay=False, clock=None)"
    assert str(inspect.signature(weir.Backoff)) == "(base, max, jitter='full', seed=None, multiplier=2.0)"
    for cls in (weir.TokenBucket, weir.LeakyBucket, weir.FixedWindow, weir.SlidingWindow, weir.SlidingLog):
        assert str(inspect.signature(cls.try_acquire)) == "(self, /, cost=1)"
        assert str(inspect.signature(cls.peek)) == "(self, /, cost=1)"
    for cls in (weir.FixedWindow, weir.SlidingWindow, weir.SlidingLog):
        assert str(inspect.signature(cls)) == "(limit, window, clock=None)"
    assert str(inspect.signature(weir.Semaphore.try_acquire)) == "(self, /, n=1)"
