fn main() {
    let dir = std::env::args().nth(1).expect("dir");
    let path = packs::SearchPath::dirs([dir]);
    for _ in 0..20 {
        let c = packs::Catalog::load(&path);
        std::hint::black_box(c);
    }
}
