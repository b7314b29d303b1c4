//! The committed header `include/ferroloop.h` must be exactly what cbindgen generates from the
//! sources. Regenerate it with `FERROLOOP_BLESS=1 cargo test -p ferroloop-capi --test header`.

use std::path::Path;

#[test]
fn committed_header_matches_the_sources() -> Result<(), Box<dyn std::error::Error>> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))?;
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()?;
    let mut generated = Vec::new();
    bindings.write(&mut generated);

    let header_path = crate_dir.join("include/ferroloop.h");
    if std::env::var_os("FERROLOOP_BLESS").is_some() {
        std::fs::write(&header_path, &generated)?;
        return Ok(());
    }
    let committed = std::fs::read(&header_path).unwrap_or_default();
    if committed != generated {
        let first_difference = committed
            .iter()
            .zip(&generated)
            .position(|(a, b)| a != b)
            .unwrap_or(committed.len().min(generated.len()));
        let line = 1 + generated[..first_difference]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        return Err(format!(
            "{} is out of date (first difference at line {line}).\n\
             Regenerate it with: FERROLOOP_BLESS=1 cargo test -p ferroloop-capi --test header",
            header_path.display()
        )
        .into());
    }
    Ok(())
}
