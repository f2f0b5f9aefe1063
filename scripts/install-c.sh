#!/bin/sh
# Builds the cantus C library in release mode and installs it with its
# headers and a pkg-config file, so that
#     cc prog.c $(pkg-config --cflags --libs cantus)
# works. Usage:
#     scripts/install-c.sh [--prefix DIR] [--target-dir DIR]
# --prefix      where to install (default /usr/local): DIR/lib/libcantus.{so,a},
#               DIR/include/{cantus.h,qthread.h,qthread/*.h},
#               DIR/lib/pkgconfig/cantus.pc
# --target-dir  cargo's build directory (default $CARGO_TARGET_DIR, else
#               target/ in the repository)
# Then, unless DIR/lib/pkgconfig is already searched:
#     export PKG_CONFIG_PATH="DIR/lib/pkgconfig:$PKG_CONFIG_PATH"
# A fully static program: cc prog.c $(pkg-config --cflags --libs --static cantus) -static
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
prefix=/usr/local
target_dir=${CARGO_TARGET_DIR:-"$repo/target"}

while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --target-dir) target_dir=${2:?--target-dir needs a directory}; shift 2 ;;
        --target-dir=*) target_dir=${1#--target-dir=}; shift ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install-c.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done

case "$prefix" in
    /*) ;;
    *) prefix=$(pwd)/$prefix ;;
esac

cargo=${CARGO:-cargo}
"$cargo" build --release --manifest-path "$repo/Cargo.toml" -p cantus-capi \
    --target-dir "$target_dir"

out=$target_dir/release
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/capi/Cargo.toml" | head -n 1)

mkdir -p "$prefix/lib/pkgconfig" "$prefix/include/qthread"
# Copy to a temporary name, then rename: a program running from the old
# library keeps its mapping.
cp "$out/libcantus_capi.so" "$prefix/lib/.libcantus.so.tmp"
mv -f "$prefix/lib/.libcantus.so.tmp" "$prefix/lib/libcantus.so"
cp "$out/libcantus_capi.a" "$prefix/lib/libcantus.a"
cp "$repo/include/cantus.h" "$repo/include/qthread.h" "$prefix/include/"
cp "$repo"/include/qthread/*.h "$repo"/include/qthread/*.hpp "$prefix/include/qthread/"

# Libs.private is for `pkg-config --static` (linking libcantus.a): what the
# Rust standard library needs from the system (rustc --print
# native-static-libs), with the unwinder as a static archive: libgcc_eh,
# the unwinder static glibc programs use (libgcc_s exists only as a shared
# library, so `cc -static` cannot link it). libgcc_eh also links into
# dynamic programs, so one list serves `-static` and static-libcantus-only
# links alike. tests/c_abi.rs links a program fully statically with it.

cat > "$prefix/lib/pkgconfig/cantus.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: cantus
Description: Lightweight user-level tasks with full/empty synchronization (C API and Qthreads-compatible subset)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lcantus
Libs.private: -lgcc_eh -lutil -lrt -lpthread -lm -ldl -lc
PC

echo "installed cantus $version into $prefix"
echo "  export PKG_CONFIG_PATH=\"$prefix/lib/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}\""
