"""Build hook: the wheel carries the course, never the instructor's ``solutions`` package.

pyproject.toml lists ``solutions`` among the packages so that an editable install
(``make setup``: ``pip install -e .``) can import it for ``lab.reveal``, the grader and the
benchmarks. A built wheel (``pip wheel .``, ``python -m build``, or ``pip install git+URL``, as
the notebooks' setup cell does on Colab) is what learners get, so its build leaves it out.
Everything else about the package is declared in pyproject.toml.
"""
from setuptools import setup
from setuptools.command.build_py import build_py

WITHHELD_PACKAGES = ("solutions",)  # top-level packages an editable install keeps and a wheel leaves out


class BuildPyWithoutSolutions(build_py):
    """`build_py` that drops the withheld packages, except for an editable install."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.editable_mode:
            self.packages = [p for p in self.packages if p.split(".")[0] not in WITHHELD_PACKAGES]


setup(cmdclass={"build_py": BuildPyWithoutSolutions})
