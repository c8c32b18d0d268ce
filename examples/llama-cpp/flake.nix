# llama.cpp built by two host compilers through nix: a real engine for qualify to qualify.
#
# This demonstrates the harness on a machine with no binary cache and no nixpkgs: every
# derivation is a `builtins.derivation` run by /bin/sh with the host's cmake, ninja and
# compilers (Debian's nix has the sandbox off). It is NOT how a real flake pins a toolchain:
# there, nixpkgs provides the compiler, and moving the pin moves its whole closure.
{
  description = "llama.cpp (from the llama-cpp-python 0.3.36 sdist) built by gcc 12 and clang 19";

  outputs =
    { self }:
    let
      system = "x86_64-linux";
      sdistName = "llama_cpp_python-0.3.36.tar.gz";

      # The source, fetched by hand (see setup.sh): a fixed-output derivation whose builder
      # only explains how to add the file, the `requireFile` pattern without nixpkgs.
      source = builtins.derivation {
        name = sdistName;
        inherit system;
        builder = "/bin/sh";
        args = [
          "-c"
          "echo 'add ${sdistName} to the store first: pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36 && nix-store --add-fixed sha256 ${sdistName}' >&2; exit 1"
        ];
        outputHashMode = "flat";
        outputHashAlgo = "sha256";
        outputHash = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e";
      };

      # A host compiler as a derivation named with its version, so each arm's build-time
      # closure names the toolchain that built it. The build fails if the host's compiler is
      # not the version the name claims.
      compiler =
        {
          name,
          version,
          cc,
          cxx,
        }:
        builtins.derivation {
          name = "${name}-${version}";
          inherit system;
          builder = "/bin/sh";
          PATH = "/usr/bin:/bin";
          args = [
            "-c"
            ''
              set -e
              mkdir -p $out/bin
              ${cc} --version > $out/version
              grep -q ' ${version}' $out/version || { echo "host ${cc} is not ${version}:" >&2; cat $out/version >&2; exit 1; }
              ln -s ${cc} $out/bin/cc
              ln -s ${cxx} $out/bin/c++
            ''
          ];
        };

      gcc12 = compiler {
        name = "gcc";
        version = "12.2.0";
        cc = "/usr/bin/gcc-12";
        cxx = "/usr/bin/g++-12";
      };
      clang19 = compiler {
        name = "clang";
        version = "19.1.7";
        cc = "/usr/bin/clang-19";
        cxx = "/usr/bin/clang++-19";
      };

      tools = [
        "llama-bench"
        "llama-perplexity"
        "llama-server"
      ];
      tests = [
        "test-quantize-fns"
        "test-rope"
        "test-backend-ops"
        "test-sampling"
        "test-grammar-parser"
        "test-log"
      ];

      llama =
        {
          name,
          toolchain,
          native,
          targets,
          testTargets,
        }:
        builtins.derivation {
          inherit name system;
          builder = "/bin/sh";
          PATH = "/usr/bin:/bin";
          src = source;
          cc = toolchain;
          native = if native then "ON" else "OFF";
          targets = builtins.concatStringsSep " " (targets ++ testTargets);
          tests = builtins.concatStringsSep " " testTargets;
          args = [
            "-c"
            (builtins.readFile ./build-llama.sh)
          ];
        };
    in
    {
      packages.${system} = {
        # pinned: gcc 12, native SIMD
        default = llama {
          name = "llama-cpp-0.3.36";
          toolchain = gcc12;
          native = true;
          targets = tools;
          testTargets = tests;
        };
        # candidate: clang 19, native SIMD
        clang19 = llama {
          name = "llama-cpp-0.3.36";
          toolchain = clang19;
          native = true;
          targets = tools;
          testTargets = tests;
        };
        # reference for numerics: portable (SSE 4.2 and AVX only, see build-llama.sh), only llama-perplexity
        reference = llama {
          name = "llama-cpp-portable-0.3.36";
          toolchain = gcc12;
          native = false;
          targets = [ "llama-perplexity" ];
          testTargets = [ ];
        };
        compiler-gcc = gcc12;
        compiler-clang = clang19;
      };
    };
}
