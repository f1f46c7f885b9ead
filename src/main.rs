//! The `packs` binary: everything lives in the library (`packs::cli`).

// Loading a pack directory makes many small allocations; mimalloc makes them cheap.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(packs::cli::main());
}
