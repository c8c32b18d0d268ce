# c-kernels: a small C library of float32 kernels (dot, axpy, a blocked gemm, softmax, rmsnorm)
# and the three programs that test, score and time them, built by two host compilers through nix.
#
# Like examples/llama-cpp, this runs on a machine with no binary cache and no nixpkgs: every
# derivation is a `builtins.derivation` run by /bin/sh with the host's compilers (Debian's nix
# has the sandbox off). A real flake would take its compilers from nixpkgs, so that moving the
# pin moves their whole closure.
{
  description = "c-kernels 0.1.0 built by gcc 12 and clang 19, and by gcc 12 at -O0";

  outputs =
    { self }:
    let
      system = "x86_64-linux";
      version = "0.1.0";

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

      # The sources are a path of this flake: nix copies the tracked files of ./src to the store,
      # so every arm builds from the same committed revision.
      kernels =
        { toolchain, opt }:
        builtins.derivation {
          name = "c-kernels-${version}";
          inherit system opt;
          builder = "/bin/sh";
          PATH = "/usr/bin:/bin";
          src = ./src;
          cc = toolchain;
          args = [
            "-c"
            (builtins.readFile ./build.sh)
          ];
        };
    in
    {
      packages.${system} = {
        # pinned: gcc 12 at -O2
        default = kernels {
          toolchain = gcc12;
          opt = "-O2";
        };
        # candidate: clang 19 at -O2
        clang19 = kernels {
          toolchain = clang19;
          opt = "-O2";
        };
        # negative control: gcc 12 at -O0, a build every kernel runs several times slower in
        slow = kernels {
          toolchain = gcc12;
          opt = "-O0";
        };
        compiler-gcc = gcc12;
        compiler-clang = clang19;
      };
    };
}
