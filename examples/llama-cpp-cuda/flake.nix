# llama.cpp's CUDA backend built for sm_90 (Hopper: H100, H200) by two CUDA toolchains through
# nix: CUDA 13.0.88 (pinned) and CUDA 13.5.37 (candidate), from one source revision.
#
# Like the CPU example beside it, every derivation is a `builtins.derivation` run by /bin/sh
# with the host's cmake, ninja and C++ compiler, and there is no nixpkgs. What moves is CUDA's
# compiler set: nvcc, cicc (nvvm), ptxas, the CUDA runtime and headers, and CCCL, each version a
# fixed-output store path made from NVIDIA's PyPI wheels (setup.sh adds them; the `requireFile`
# pattern). The derivation is named `cuda_nvcc-VERSION`, so the build stage names CUDA's version
# in each closure and its mixed-toolchain gate applies.
#
# cuBLAS and the driver's libcuda are the host's (found at build time, recorded in
# share/host-cuda.txt): they are libraries, not the compiler, and both arms link the same ones,
# so they cannot explain a difference between the arms. This is impure, which Debian's nix (no
# sandbox) allows; a nixpkgs flake would take them from cudaPackages.
{
  description = "llama.cpp's CUDA backend (llama-cpp-python 0.3.36 sdist) built by CUDA 13.0 and 13.5 for sm_90";

  outputs =
    { self }:
    let
      system = "x86_64-linux";

      # A tree fixed by the NAR hash of its content (`nix-store --add-fixed --recursive`):
      # the builder only says how to add it.
      fixedTree =
        { name, hash }:
        builtins.derivation {
          inherit name system;
          builder = "/bin/sh";
          args = [
            "-c"
            "echo 'add ${name} to the store first: run examples/llama-cpp-cuda/setup.sh' >&2; exit 1"
          ];
          outputHashMode = "recursive";
          outputHashAlgo = "sha256";
          outputHash = hash;
        };

      # vendor/llama.cpp of the llama-cpp-python 0.3.36 sdist (sha256 832db069…), less what no
      # build reads (models, docs, benches, media, conversion scripts): 58 MB instead of 176.
      source = fixedTree {
        name = "llama-cpp-src-0.3.36";
        hash = "0s0axmfawc9xbniddccdmvv206k8gyq40hbhzzdrgajwd0ir0h89";
      };

      # CUDA's compiler set from the PyPI wheels (cuda_toolchain.py lists them, with hashes).
      cuda130 = fixedTree {
        name = "cuda_nvcc-13.0.88";
        hash = "0jp5vqnm1xck8pyw6awjajg85kc9g9z883h0m9sk953hz4xm7izr";
      };
      cuda135 = fixedTree {
        name = "cuda_nvcc-13.5.37";
        hash = "028zn6h7dwzs0vnhpcfmyxxvq0w182s49lzpzky3dlfibrvdx56d";
      };

      tools = [
        "llama-bench"
        "llama-perplexity"
        "llama-server"
      ];

      llama =
        {
          name,
          cuda,
          targets,
          tests,
        }:
        builtins.derivation {
          inherit name system;
          builder = "/bin/sh";
          PATH = "/usr/local/bin:/usr/bin:/bin";
          src = source;
          inherit cuda;
          targets = builtins.concatStringsSep " " (targets ++ tests);
          tests = builtins.concatStringsSep " " tests;
          args = [
            "-c"
            (builtins.readFile ./build-llama-cuda.sh)
          ];
        };
    in
    {
      packages.${system} = {
        # pinned: CUDA 13.0.88
        default = llama {
          name = "llama-cpp-cuda-0.3.36";
          cuda = cuda130;
          targets = tools;
          tests = [ "test-backend-ops" ];
        };
        # candidate: CUDA 13.5.37
        cuda135 = llama {
          name = "llama-cpp-cuda-0.3.36";
          cuda = cuda135;
          targets = tools;
          tests = [ "test-backend-ops" ];
        };
        # reference for numerics: the same source on the CPU, portable (no CUDA, no native
        # SIMD): every kernel an independent implementation, in float32.
        reference = llama {
          name = "llama-cpp-portable-0.3.36";
          cuda = "";
          targets = [ "llama-perplexity" ];
          tests = [ ];
        };
        cuda-13_0 = cuda130;
        cuda-13_5 = cuda135;
        src = source;
      };
    };
}
