"""`qualify remedy` for real on CUDA: the Q2_K MMQ instance of ggml (`mmq-instance-q2_k.cu`, the
file of the kernel the CUDA example's bisect found flipping, `mul_mat_q<Q2_K, 128, false>`)
compiled as a library's build compiles it, judged by `qualify run`, then rebuilt by the CUDA
example's own `ptxas-o1` and `as-built` units through nix (flake.nix: the file compiled alone to
a cubin for sm_90 by CUDA 13.5.37 with ggml's flags, build-slice.sh) and compared kernel by
kernel.

Everything is real: nvcc and ptxas (the spill bytes are their reports'), the host objects whose
FILE symbols tie the kernels to the file, the units' nix builds and the candidate's cuobjdump
with NVIDIA's nvdisasm (the instruction mix and code bytes). What stands in is the pinned role:
the file compiled with ptxas at -O1, where that kernel does not spill, rather than by another
CUDA release, so that one toolchain tree (and the source tree) in the nix store is all the test
needs. The candidate is the file as the library's build compiles it, where the kernel spills
124 bytes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
from conftest import qualify_proc
from cuda_wheels import load_toolchain, wheel_tree
from ggml_cuda import command
from ggml_sdist import sdist_path
from rocm_store import add_source, add_tree, store_path
from test_cuda_ggml import Judge, candidate_decoder

pytestmark = [pytest.mark.slow, pytest.mark.nix]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama-cpp-cuda"
FLAKE = EXAMPLE / "flake.nix"
CANDIDATE = load_toolchain().CANDIDATE
TREE = f"cuda_nvcc-{CANDIDATE}"
FILE = "mmq-instance-q2_k.cu"
FLIPPING = "_Z9mul_mat_qIL9ggml_type10ELi128ELb0"


def valid(path: str) -> bool:
    return subprocess.run(["nix-store", "--check-validity", path], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def cuda_tree() -> Path:
    """CUDA 13.5.37's tree in the nix store as the example's flake pins it: there already
    (setup.sh), or made from NVIDIA's wheels and added."""
    if shutil.which("nix-store") is None:
        pytest.skip("nix is not installed")
    path = store_path(TREE, FLAKE)
    if not valid(path):
        add_tree(TREE, wheel_tree(CANDIDATE), FLAKE)
    if not valid(store_path("llama-cpp-src-0.3.36", FLAKE)):
        sdist = sdist_path()
        if sdist is None:
            pytest.skip("the llama-cpp-python 0.3.36 sdist is not in the nix store (`make example` adds it)")
        add_source(sdist)
    return Path(path)


def library_object(tree: Path, flags: list[str], root: Path) -> Path:
    """An out-path-like tree holding the file as a library's build compiles it: a host object
    (`nvcc -c`, ggml's flags then `flags`), whose fatbin the compile stage ties to the file by
    the object's FILE symbol, and ptxas's report beside it (share/<stem>.log)."""
    ggml = Path(store_path("llama-cpp-src-0.3.36", FLAKE)) / "ggml"
    argv = ["-c" if a == "-cubin" else a for a in command(tree / "bin" / "nvcc", ggml)]
    (root / "lib").mkdir(parents=True)
    (root / "share").mkdir()
    source = ggml / "src" / "ggml-cuda" / "template-instances" / FILE
    argv += [*flags, str(source), "-o", str(root / "lib" / f"{source.stem}.o")]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    (root / "share" / f"{source.stem}.log").write_text(done.stdout + done.stderr)
    return root


def test_ptxas_o1_brings_the_q2_k_spill_back_and_as_built_changes_nothing(
    cuda_tree: Path, nix_flakes: dict[str, str], tmp_path: Path
) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        pinned_job = pool.submit(library_object, cuda_tree, ["-Xptxas", "-O1"], tmp_path / "pinned")
        candidate_job = pool.submit(library_object, cuda_tree, [], tmp_path / "candidate")
        pinned, candidate = pinned_job.result(), candidate_job.result()
    judge = Judge(tmp_path)
    result, check = judge(pinned, candidate, cuobjdump=str(candidate_decoder(tmp_path, cuda_tree)))
    assert result["verdict"] == "FAIL", result["reason"]
    diff = pd.read_parquet(check / "diff.parquet")
    failing = set(diff.loc[(diff["severity"] == "FAIL") & (diff["family"] == "cuda"), "key"])
    assert any(k.startswith(FLIPPING) for k in failing), failing
    project = check.parents[3]  # PROJECT/runs/RUN/20-compile/kernels
    with (project / "qualify.toml").open("a") as config:
        config.write(
            f"""
[remedies.ptxas-o1]
installable = "{EXAMPLE}#remedy-ptxas-o1"
flags = "-Xptxas -O1"
[remedies.as-built]
installable = "{EXAMPLE}#remedy-as-built"
"""
        )

    run = check.parents[1].name
    done = qualify_proc("remedy", run, "--json", "--project", str(project))
    assert done.returncode == 0, done.stdout + done.stderr
    said = json.loads(done.stdout)
    assert [(f["source_file"], len(f["failing"])) for f in said["failing"]] == [(FILE, len(failing))]
    o1, built = said["variants"]["ptxas-o1"], said["variants"]["as-built"]
    assert o1["not_built"] == built["not_built"] == {}
    [back] = o1["sources"]
    # The unit is pinned's build: every failure comes back and nothing breaks.
    assert back["recovered"] == back["failing_before"] == len(failing) and back["newly_broken"] == 0
    assert back["missing"] == back["extra"] == 0
    assert any(k.startswith(FLIPPING) for k in back["recovered_kernels"])
    [same] = built["sources"]
    # The unit is the candidate's build: nothing changes, figure for figure and byte for byte.
    assert same["recovered"] == same["newly_broken"] == 0 and same["code_change_pct"] == 0
    assert same["code_bytes_before"] and same["warn_before"] == same["warn_after"]
    # The spill bytes came from the unit's own ptxas report.
    folder = Path(said["remedy_dir"])
    table = pd.read_parquet(folder / "as-built" / FILE / "1" / "cuda.parquet")
    spills = table.loc[table["key"].str.startswith(FLIPPING), "spill_store_bytes"]
    assert list(spills) == [124]

    # Judged again from the saved units alone: the same answer.
    again = qualify_proc("remedy", run, "--no-build", "--json", "--project", str(project))
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["variants"] == said["variants"]
