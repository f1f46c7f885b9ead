//! The `packs` binary: everything lives in the library (`packs::cli_main`).

fn main() {
    std::process::exit(packs::cli_main());
}
