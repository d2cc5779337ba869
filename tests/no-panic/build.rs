//! Link like firmware: no C start files, no `main`. The host's libc supplies
//! `memcpy`/`bcmp` (a firmware target gets them from compiler-builtins), and
//! the prebuilt host `core` still names an unwinding personality in its
//! unwind tables: with `panic = "abort"` it is never called, so it is
//! resolved to address zero rather than defined in (unsafe) code.

fn main() {
    println!("cargo:rustc-link-arg-bins=-nostartfiles");
    println!("cargo:rustc-link-arg-bins=-lc");
    println!("cargo:rustc-link-arg-bins=-Wl,--defsym=rust_eh_personality=0");
}
