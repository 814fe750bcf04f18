//! Names the git commit this binary is built from (`--version`).

fn main() {
    cosi_build::emit();
}
