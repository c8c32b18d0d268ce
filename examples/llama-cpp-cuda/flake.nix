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
# For a bisect between the two, every nvcc release from 13.0.48 to 13.5.37 is a tree too
# (`cuda-13_0_48` ... `cuda-13_5_37`; `setup.sh --series` adds them), and `slice-13_0_48` ...
# `slice-13_5_37` compile by each the few ggml-cuda sources that hold the kernels 13.5.37 changes
# for the worse: cubins and ptxas reports for a compile stage's kernel-resources check, about 3
# CPU minutes a release.
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

      # Every nvcc release from 13.0.48 to 13.5.37, oldest first (cuda_toolchain.py's SERIES and
      # its pins): the steps a bisect between the two arms walks. `setup.sh --series` adds them.
      series = [
        (fixedTree {
          name = "cuda_nvcc-13.0.48";
          hash = "1nsc7d69f044v6gk8bhwyvnsr8b5xcdm2agj1vvqphm2j61gc3zk";
        })
        cuda130
        (fixedTree {
          name = "cuda_nvcc-13.1.80";
          hash = "17aibj6icv22g7kmvhyijwl81x0f20dl14d10js5qkdim3dn1w8d";
        })
        (fixedTree {
          name = "cuda_nvcc-13.1.115";
          hash = "0hbsdbgkw5j7ylzh9kznfnrvdbahvmc7fp24q4rlm91zqiksw327";
        })
        (fixedTree {
          name = "cuda_nvcc-13.2.51";
          hash = "0bzww5qpfzk3baj2z803xplsvlw7hajk795z8fxpg0snv5pn2m1z";
        })
        (fixedTree {
          name = "cuda_nvcc-13.2.78";
          hash = "0wwavlg67paka798qdlnx9apjcwwhdwwklqvh366ngrk2iw8qh8h";
        })
        (fixedTree {
          name = "cuda_nvcc-13.2.86";
          hash = "130jaqzbd6srm7nsygr1h73xl9fqjmlbcv1csq7lnvcfh9h6kk36";
        })
        (fixedTree {
          name = "cuda_nvcc-13.3.33";
          hash = "1q5lvln80frg598k184h55kag09y4gwj764yrc3rqh0gj40v0av1";
        })
        (fixedTree {
          name = "cuda_nvcc-13.3.73";
          hash = "19yhz9wpmgcmkjp22ip4xwlri49b3r6isl8xnbi329cvlbhzvzjr";
        })
        (fixedTree {
          name = "cuda_nvcc-13.4.59";
          hash = "1f158d1rmppdkmra4zby4acjb1la6h03fnwskkzfv7rp7b835gmz";
        })
        (fixedTree {
          name = "cuda_nvcc-13.4.92";
          hash = "1ycaj52nz5paw44d93wrqqa0hzmq9q2h9hmhb40j39p1dxwgckd5";
        })
        cuda135
      ];
      # "13.0.88" -> "13_0_88", for output names
      tag = tree: builtins.replaceStrings [ "." ] [ "_" ] (builtins.parseDrvName tree.name).version;

      # The translation units of ggml-cuda that hold the kernels 13.5.37 changes for the worse
      # (README, "Kernels"), longest compile first: all 16 that spill more (15 flash_attn_ext_f16
      # at head size 512 or 576, in the MMA instances of their ncols1 x ncols2, and the Q2_K
      # mul_mat_q) and 20 of the 48 that lose occupancy (flash_attn_ext_vec at head size 64 for
      # Q4_0 and Q8_0, mul_mat_f for 4 columns, lightning_indexer, pool2d): 476 kernels, each with
      # the recorded H200 build's figures at both ends. 184 s of CPU with 13.0.88, 209 s with
      # 13.5.37.
      sliceSources = [
        "template-instances/mmq-instance-q2_k.cu"
        "template-instances/fattn-mma-f16-instance-ncols1_8-ncols2_8.cu"
        "template-instances/fattn-mma-f16-instance-ncols1_16-ncols2_4.cu"
        "template-instances/fattn-mma-f16-instance-ncols1_32-ncols2_2.cu"
        "template-instances/fattn-mma-f16-instance-ncols1_8-ncols2_4.cu"
        "template-instances/fattn-mma-f16-instance-ncols1_4-ncols2_4.cu"
        "template-instances/fattn-mma-f16-instance-ncols1_1-ncols2_16.cu"
        "template-instances/fattn-vec-instance-q4_0-q4_0.cu"
        "template-instances/fattn-vec-instance-q8_0-q8_0.cu"
        "template-instances/mmf-instance-ncols_4.cu"
        "template-instances/fattn-mma-f16-instance-ncols1_2-ncols2_32.cu"
        "template-instances/fattn-mma-f16-instance-ncols1_1-ncols2_32.cu"
        "template-instances/fattn-mma-f16-instance-ncols1_4-ncols2_16.cu"
        "template-instances/fattn-mma-f16-instance-ncols1_2-ncols2_16.cu"
        "lightning-indexer.cu"
        "pool2d.cu"
      ];
      # One toolchain's cubins of those sources for sm_90, each with its ptxas -v report:
      # lib/<stem>.cubin, share/<stem>.log, share/cuda-version (what the kernel-resources check
      # of a compile stage reads).
      slice =
        cuda:
        builtins.derivation {
          name = "ggml-cuda-slice-0.3.36";
          inherit system cuda;
          builder = "/bin/sh";
          PATH = "/usr/local/bin:/usr/bin:/bin";
          src = source;
          sources = builtins.concatStringsSep " " sliceSources;
          args = [
            "-c"
            (builtins.readFile ./build-slice.sh)
          ];
        };

      # Remedy units: each ggml-cuda source that holds a kernel of libggml-cuda.so
      # (cuda-sources.txt, the `source_file`s of the library's kernels), compiled alone by the
      # candidate's toolchain with ggml's flags (build-slice.sh, as the slices are) and then a
      # variant's: a cubin and its ptxas report, as the library holds them for that file.
      # `qualify remedy` builds only the units of the sources whose kernels failed
      # (`remedy-<variant>.<source's stem>`) and compares them with both arms.
      cudaSources = builtins.filter (s: builtins.isString s && s != "") (
        builtins.split "\n" (builtins.readFile ./cuda-sources.txt)
      );
      unitName = path: builtins.replaceStrings [ ".cu" ] [ "" ] (baseNameOf path);
      units =
        variant: flags:
        builtins.listToAttrs (
          map (path: {
            name = unitName path;
            value = builtins.derivation {
              name = "cuda-unit-${variant}-${unitName path}";
              inherit system;
              cuda = cuda135;
              builder = "/bin/sh";
              PATH = "/usr/local/bin:/usr/bin:/bin";
              src = source;
              sources = path;
              flags = builtins.concatStringsSep " " flags;
              # What qualify reads to tie the unit to the library's kernels: the source's name
              # as the library's kernels name it.
              source_file = baseNameOf path;
              args = [
                "-c"
                (builtins.readFile ./build-slice.sh)
              ];
            };
          }) cudaSources
        );
      # The variants: what each changes in CUDA 13.5.37's code generation for sm_90, aimed at
      # the spill the bisect found (`mul_mat_q<Q2_K, 128>`, 100 -> 124 bytes from 13.2.51 on).
      remedies = {
        # No flag: the candidate as the arm built it, to check a unit reproduces the library's kernels.
        remedy-as-built = units "as-built" [ ];
        # ptxas at -O2 instead of -O3: another register allocation and schedule.
        remedy-ptxas-o2 = units "ptxas-o2" [
          "-Xptxas"
          "-O2"
        ];
        # ptxas at -O1: a lower optimisation level, with a register allocation and schedule of its own.
        remedy-ptxas-o1 = units "ptxas-o1" [
          "-Xptxas"
          "-O1"
        ];
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
      }
      # cuda-13_0_48 ... cuda-13_5_37: the toolchain trees; slice-13_0_48 ... slice-13_5_37:
      # the kernel slice each of them compiles.
      // builtins.listToAttrs (
        builtins.concatMap (tree: [
          {
            name = "cuda-${tag tree}";
            value = tree;
          }
          {
            name = "slice-${tag tree}";
            value = slice tree;
          }
        ]) series
      );
      # Attribute sets of derivations, not derivations: `nix build .#remedy-ptxas-o2.mmq-instance-q2_k`.
      legacyPackages.${system} = remedies;
    };
}
