//! A page as a reader sees it: rendered by headless Chromium (Debian's
//! package; scripts/dev-env.sh installs it) into `target/<name>.png`, to
//! look at after the test.

/// Renders `html` at `width` x `height` into `target/<name>.png`; checks
/// that a picture of that size came out and that it is not blank (a page
/// of text and tables compresses far less than an empty one).
pub fn screenshot(html: &str, name: &str, width: u32, height: u32) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join(format!("{name}.html"));
    std::fs::write(&page, html).unwrap();
    let png = crate::repo_root().join(format!("target/{name}.png"));
    let _ = std::fs::remove_file(&png);
    let out = std::process::Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium (Debian's package; scripts/dev-env.sh installs it)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let size = (
        u32::from_be_bytes(bytes[16..20].try_into().unwrap()),
        u32::from_be_bytes(bytes[20..24].try_into().unwrap()),
    );
    assert_eq!(size, (width, height));
    assert!(
        bytes.len() > 20_000,
        "{} bytes: the page looks empty",
        bytes.len()
    );
    bytes
}
