//! The `packs` binary: everything lives in the library (`packs::cli`).

fn main() {
    std::process::exit(packs::cli::main());
}
