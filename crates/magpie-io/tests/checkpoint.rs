//! Checkpoint folders: round trip, atomic replacement, and clear errors for every kind of damage.

use magpie_io::checkpoint::{load_dir, save_dir, MANIFEST};
use std::path::Path;

fn files(step: u32) -> Vec<(String, Vec<u8>)> {
    vec![
        ("meta.json".to_string(), format!("{{\"step\": {step}}}").into_bytes()),
        ("blob.bin".to_string(), (0..1000u32).map(|i| (i * 7 + step) as u8).collect()),
    ]
}

fn msg<T: std::fmt::Debug>(r: magpie_core::Result<T>) -> String {
    r.expect_err("expected an error").to_string()
}

#[test]
fn round_trip_and_replace() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ck");
    save_dir(&dir, &files(1)).unwrap();
    assert_eq!(load_dir(&dir).unwrap().bytes("meta.json").unwrap(), b"{\"step\": 1}");
    save_dir(&dir, &files(2)).unwrap();
    let ck = load_dir(&dir).unwrap();
    assert_eq!(ck.bytes("meta.json").unwrap(), b"{\"step\": 2}");
    assert_eq!(ck.names(), ["blob.bin", "meta.json"]);
    // no temporary or old folders are left behind
    let left: Vec<String> = std::fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, ["ck"]);
}

#[test]
fn refuses_to_replace_other_folders() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("precious.txt"), b"x").unwrap();
    let e = msg(save_dir(root.path(), &files(1)));
    assert!(e.contains("not a checkpoint folder"), "{e}");
    assert!(root.path().join("precious.txt").exists());
}

fn damaged(f: impl Fn(&Path)) -> String {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ck");
    save_dir(&dir, &files(1)).unwrap();
    f(&dir);
    msg(load_dir(&dir))
}

#[test]
fn damage_is_a_clear_error() {
    let e = damaged(|d| {
        let b = std::fs::read(d.join("blob.bin")).unwrap();
        std::fs::write(d.join("blob.bin"), &b[..500]).unwrap();
    });
    assert!(e.contains("blob.bin is 500 bytes but the manifest says 1000"), "{e}");
    let e = damaged(|d| {
        let mut b = std::fs::read(d.join("blob.bin")).unwrap();
        b[10] ^= 1;
        std::fs::write(d.join("blob.bin"), &b).unwrap();
    });
    assert!(e.contains("fails its checksum"), "{e}");
    let e = damaged(|d| std::fs::remove_file(d.join("meta.json")).unwrap());
    assert!(e.contains("cannot read meta.json"), "{e}");
    let e = damaged(|d| std::fs::remove_file(d.join(MANIFEST)).unwrap());
    assert!(e.contains("is not a checkpoint"), "{e}");
    let e = damaged(|d| {
        let m = std::fs::read(d.join(MANIFEST)).unwrap();
        std::fs::write(d.join(MANIFEST), &m[..m.len() / 2]).unwrap();
    });
    assert!(e.contains("manifest.json is corrupt"), "{e}");
    let root = tempfile::tempdir().unwrap();
    let e = msg(load_dir(&root.path().join("nope")));
    assert!(e.contains("does not exist"), "{e}");
}

#[test]
fn interrupted_swap_is_reported() {
    // simulate a crash between moving the old checkpoint aside and moving the new one in
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ck");
    save_dir(&dir, &files(1)).unwrap();
    std::fs::rename(&dir, root.path().join(".ck.old-123")).unwrap();
    let e = msg(load_dir(&dir));
    assert!(e.contains("interrupted save left the previous one"), "{e}");
    // a half-written temporary folder is never read as the checkpoint
    std::fs::create_dir(root.path().join(".ck.tmp-9")).unwrap();
    save_dir(&dir, &files(3)).unwrap();
    assert_eq!(load_dir(&dir).unwrap().bytes("meta.json").unwrap(), b"{\"step\": 3}");
}
