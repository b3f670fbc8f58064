//! Writes the o200k vocabulary (every token's bytes, in rank order) as two
//! compact tables into the build folder, for `src/llm/tokenizer.rs` to
//! include. They come from `bpe-openai`'s own o200k tokenizer, read here at
//! build time: built at run time, its tables take 65 MB of the daemon's
//! memory, and counting needs only the vocabulary (about 2 MB).

use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let bpe = &bpe_openai::o200k_base().bpe;
    let mut bytes = Vec::new();
    let mut starts = vec![0u32];
    for token in 0..bpe.num_tokens() as u32 {
        bytes.extend_from_slice(bpe.token_bytes(token));
        starts.push(bytes.len() as u32);
    }
    let starts: Vec<u8> = starts.iter().flat_map(|s| s.to_le_bytes()).collect();
    for (name, data) in [("o200k.bytes", &bytes), ("o200k.starts", &starts)] {
        if let Err(e) = std::fs::write(out.join(name), data) {
            panic!("cannot write {name} into {}: {e}", out.display());
        }
    }
}
