fn main() {
    std::process::exit(packs::cli::main());
}
