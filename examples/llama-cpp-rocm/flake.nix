# llama.cpp's HIP backend built for gfx1151 (Strix Halo), gfx942 (MI300X) or gfx950 (MI350), one
# target per output, by two ROCm toolchains through nix: ROCm 6.4 (Debian sid, pinned) and ROCm 7.2 (Debian
# experimental, candidate), from one source revision.
#
# Like the other examples, every derivation is a `builtins.derivation` run by /bin/sh, and there
# is no nixpkgs. Each toolchain is a whole root made from Debian's packages pinned by sha256
# (rocm_toolchain.py, debs/): sid's glibc, libstdc++, cmake, ninja, clang and ROCm, because both
# ROCm stacks need a newer glibc than the build host's. It is a fixed-output store path added by
# its content (setup.sh), entered by the builder with bubblewrap (enter-root.sh). Small views of
# it, each named after one component with the version the root's package list gives (the view's
# builder checks it), put HIP, hipcc, clang, rocBLAS, hipBLAS and the device libraries into the
# build closure by name, so the build stage's toolchain table shows the move and its
# mixed-toolchain gate applies.
{
  description = "llama.cpp's HIP backend (llama-cpp-python 0.3.36 sdist) built by ROCm 6.4 and 7.2 for gfx1151, gfx942 and gfx950";

  outputs =
    { self }:
    let
      system = "x86_64-linux";

      # A tree fixed by the NAR hash of its content (`nix-store --add-fixed --recursive`).
      fixedTree =
        { name, hash }:
        builtins.derivation {
          inherit name system;
          builder = "/bin/sh";
          args = [
            "-c"
            "echo 'add ${name} to the store first: run examples/llama-cpp-rocm/setup.sh' >&2; exit 1"
          ];
          outputHashMode = "recursive";
          outputHashAlgo = "sha256";
          outputHash = hash;
        };

      # The same trimmed source tree as the CUDA example (vendor/llama.cpp of the sdist).
      source = fixedTree {
        name = "llama-cpp-src-0.3.36";
        hash = "0s0axmfawc9xbniddccdmvv206k8gyq40hbhzzdrgajwd0ir0h89";
      };

      # The roots (rocm_toolchain.py pins their NAR hashes and lists their .debs).
      root643 = fixedTree {
        name = "rocm-root-6.4.3";
        hash = "0j6vwh4cx4iv94y5fb3ry3c6skvr9qfdlqz7la7ksqpnsnanq5h5";
      };
      root724 = fixedTree {
        name = "rocm-root-7.2.4";
        hash = "0b63y2z1ny31fmvz0r6hn7899yxv90f64krwjxzbkqhgx443cmif";
      };

      # One component of a root under its own name: fails unless the root holds that package
      # at that Debian version.
      view =
        root:
        {
          name,
          deb,
          version,
        }:
        builtins.derivation {
          inherit name system root;
          builder = "/bin/sh";
          PATH = "/usr/bin:/bin";
          args = [
            "-c"
            ''
              grep -q "^${deb} ${version} " "$root/DEBS" || {
                echo "${name}: $root holds no ${deb} ${version}:" >&2; grep "^${deb} " "$root/DEBS" >&2; exit 1; }
              mkdir -p "$out"; ln -s "$root" "$out/root"; echo "${deb} ${version}" > "$out/package"
            ''
          ];
        };

      toolchain =
        root: versions:
        let
          v = view root;
        in
        {
          inherit root;
          inherit (versions) llvm;
          components = [
            (v { name = "hip-${versions.hip}"; deb = "libamdhip64-dev"; version = versions.hipDeb; })
            (v { name = "hipcc-${versions.hipcc}"; deb = "hipcc"; version = versions.hipccDeb; })
            (v { name = "clang-${versions.clang}"; deb = "clang-${versions.llvm}"; version = versions.clangDeb; })
            (v { name = "rocblas-${versions.rocblas}"; deb = "librocblas-dev"; version = versions.rocblasDeb; })
            (v { name = "hipblas-${versions.hipblas}"; deb = "libhipblas-dev"; version = versions.hipblasDeb; })
            (v {
              name = "rocm-device-libs-${versions.devicelibs}";
              deb = "rocm-device-libs-${versions.llvm}";
              version = versions.devicelibsDeb;
            })
          ];
        };

      rocm64 = toolchain root643 {
        llvm = "21";
        hip = "6.4.3"; hipDeb = "6.4.3-5";
        hipcc = "7.0.2"; hipccDeb = "7.0.2+dfsg-3";
        clang = "21.1.8"; clangDeb = "1:21.1.8-14";
        rocblas = "6.4.4"; rocblasDeb = "6.4.4-4";
        hipblas = "6.4.4"; hipblasDeb = "6.4.4-1";
        devicelibs = "7.0.2"; devicelibsDeb = "7.0.2+dfsg-3";
      };
      rocm72 = toolchain root724 {
        llvm = "22";
        hip = "7.2.4"; hipDeb = "7.2.4-1~exp2";
        hipcc = "7.2.4"; hipccDeb = "7.2.4+dfsg-1~exp1";
        clang = "22.1.8"; clangDeb = "1:22.1.8-3";
        rocblas = "7.2.4"; rocblasDeb = "7.2.4-1~exp1";
        hipblas = "7.2.4"; hipblasDeb = "7.2.4-1~exp1";
        devicelibs = "7.2.4"; devicelibsDeb = "7.2.4+dfsg-1~exp1";
      };

      tools = [
        "llama-bench"
        "llama-perplexity"
        "llama-server"
      ];

      llama =
        {
          name,
          rocm,
          gpus,
          targets ? tools,
          tests ? "test-backend-ops",
        }:
        builtins.derivation {
          inherit name system gpus tests;
          builder = "/bin/sh";
          PATH = "/usr/local/bin:/usr/bin:/bin";
          src = source;
          rocm = rocm.root;
          llvm = rocm.llvm;
          components = rocm.components;
          enter = ./enter-root.sh;
          probe = ./amd-device.sh;
          targets = builtins.concatStringsSep " " targets;
          args = [
            "-c"
            (builtins.readFile ./build-llama-rocm.sh)
          ];
        };
      # One target per arm: a maintainer qualifying a ROCm move builds for the part they ship,
      # and each target compiles every HIP translation unit once more. gfx1151 (Strix Halo) is
      # `default` / `rocm72`; gfx942 and gfx950 are the same arms under their target's name.
      arms = target: {
        # pinned: ROCm 6.4 (HIP 6.4.3, hipcc 7.0.2 on clang 21)
        pinned = llama {
          name = "llama-cpp-hip-${target}-0.3.36";
          rocm = rocm64;
          gpus = target;
        };
        # candidate: ROCm 7.2 (HIP 7.2.4 on clang 22)
        rocm72 = llama {
          name = "llama-cpp-hip-${target}-0.3.36";
          rocm = rocm72;
          gpus = target;
        };
      };
      # Remedy units: each HIP source of libggml-hip.so (hip-sources.txt, as the arms' ninja
      # logs list them) compiled alone for the device, by the candidate's toolchain, with
      # ggml's flags and a variant's. `qualify remedy` builds only the units of the sources whose
      # kernels failed (`remedy-<variant>.<source's name>`) and compares them with both arms.
      ggmlFlags = [
        "-DGGML_BACKEND_BUILD"
        "-DGGML_BACKEND_SHARED"
        "-DGGML_HIP_GRAPHS"
        "-DGGML_HIP_NO_VMM"
        "-DGGML_SCHED_MAX_COPIES=4"
        "-DGGML_SHARED"
        "-DGGML_USE_HIP"
        "-DUSE_PROF_API=1"
        "-D_GNU_SOURCE"
        "-D_XOPEN_SOURCE=600"
        "-D__HIP_PLATFORM_AMD__=1"
        "-D__HIP_ROCclr__=1"
        "-Dggml_hip_EXPORTS"
      ]
      ++ faFlags
      ++ [
        "-O3"
        "-DNDEBUG"
        "-std=gnu++17"
        "-fPIC"
      ];
      # GGML_CUDA_FA_QUANTS' default: the K/V type pairs the flash-attention sources instantiate.
      faTypes = [ "BF16" "F16" "Q4_0" "Q4_1" "Q5_0" "Q5_1" "Q8_0" ];
      faOn = [ "Q4_0-Q4_0" "Q8_0-Q8_0" "F16-F16" "BF16-BF16" ];
      faFlags =
        builtins.concatLists (
          map (k: map (v: "-DGGML_CUDA_FA_${k}_${v}=${if builtins.elem "${k}-${v}" faOn then "1" else "0"}") faTypes) faTypes
        )
        ++ [ ''-DGGML_CUDA_FA_QUANTS="q4_0-q4_0,q8_0-q8_0,f16-f16,bf16-bf16"'' ];
      hipSources = builtins.filter (s: builtins.isString s && s != "") (
        builtins.split "\n" (builtins.readFile ./hip-sources.txt)
      );
      unitName = path: builtins.replaceStrings [ ".cu" ] [ "" ] (baseNameOf path);
      unit =
        {
          rocm,
          gpus,
          variant,
          flags,
          path,
        }:
        builtins.derivation {
          name = "hip-unit-${variant}-${unitName path}";
          inherit system gpus;
          builder = "/bin/sh";
          PATH = "/usr/bin:/bin";
          src = source;
          rocm = rocm.root;
          llvm = rocm.llvm;
          enter = ./enter-root.sh;
          source_path = path;
          # What qualify reads to tie the unit to the library's kernels: the source's name as
          # the compiler writes it into the library's symbol table.
          source_file = baseNameOf path;
          ggmlFlags = builtins.concatStringsSep "\n" ggmlFlags;
          variantFlags = builtins.concatStringsSep "\n" flags;
          args = [
            "-c"
            (builtins.readFile ./compile-hip-unit.sh)
          ];
        };
      units =
        rocm: gpus: variant: flags:
        builtins.listToAttrs (
          map (path: {
            name = unitName path;
            value = unit { inherit rocm gpus variant flags path; };
          }) hipSources
        );
      # The variants: what each changes in the candidate's code generation for gfx1151.
      remedies = {
        # No flag: the candidate as the arm built it, to check a unit reproduces the library's kernels.
        remedy-as-built = units rocm72 "gfx1151" "as-built" [ ];
        # clang 22 turns on real 16-bit registers (the `real-true16` target feature) for gfx1151.
        remedy-true16-off = units rocm72 "gfx1151" "true16-off" [
          "-Xclang"
          "-target-feature"
          "-Xclang"
          "-real-true16"
        ];
        # The SLP vectoriser off for the device code.
        remedy-slp-off = units rocm72 "gfx1151" "slp-off" [
          "-Xarch_device"
          "-fno-slp-vectorize"
        ];
      };
      gfx1151 = arms "gfx1151";
      gfx942 = arms "gfx942";
      gfx950 = arms "gfx950";
    in
    {
      packages.${system} = {
        default = gfx1151.pinned;
        rocm72 = gfx1151.rocm72;
        gfx942 = gfx942.pinned;
        gfx942-rocm72 = gfx942.rocm72;
        gfx950 = gfx950.pinned;
        gfx950-rocm72 = gfx950.rocm72;
        # reference for numerics: the same source on the CPU, portable (no HIP, no native SIMD),
        # built by ROCm 6.4's root clang: every kernel an independent implementation, in float32.
        reference = llama {
          name = "llama-cpp-portable-0.3.36";
          rocm = rocm64;
          gpus = "";
          targets = [ "llama-perplexity" ];
          tests = "";
        };
        rocm-6_4 = root643;
        rocm-7_2 = root724;
        src = source;
      };
      # Attribute sets of derivations, not derivations: `nix build .#remedy-true16-off.mmvq`.
      legacyPackages.${system} = remedies;
    };
}
