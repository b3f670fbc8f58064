use super::*;
use crate::git::signing::CommitSigner;
use git2::{Repository, Signature, Time};
use std::path::Path;
use std::process::Command;

const TRAILER: &str = "Co-authored-by: alice <42+alice@users.noreply.github.com>";

fn alice() -> CoAuthor {
    CoAuthor::noreply(crate::forge::ForgeKind::GitHub, "github.com", "alice", 42).unwrap()
}

#[test]
fn noreply_addresses_follow_each_forge() {
    assert_eq!(alice().trailer(), TRAILER);
    let bob = CoAuthor::noreply(crate::forge::ForgeKind::GitLab, "gitlab.example.org", "bob", 7).unwrap();
    assert_eq!(bob.email, "7-bob@users.noreply.gitlab.example.org");
    assert_eq!(
        CoAuthor::noreply(crate::forge::ForgeKind::Local, "x", "y", 1),
        None
    );
}

#[test]
fn the_trailer_goes_after_a_blank_line_or_joins_a_trailer_block() {
    assert_eq!(
        with_trailer("Fix it\n", TRAILER),
        format!("Fix it\n\n{TRAILER}\n")
    );
    assert_eq!(
        with_trailer("Fix: it", TRAILER),
        format!("Fix: it\n\n{TRAILER}\n"),
        "a subject is not a trailer block"
    );
    assert_eq!(
        with_trailer("Fix it\n\nBody.\n\nSigned-off-by: x <x@y>\n", TRAILER),
        format!("Fix it\n\nBody.\n\nSigned-off-by: x <x@y>\n{TRAILER}\n")
    );
}

#[test]
fn a_trailer_already_there_is_not_added_twice() {
    let once = with_trailer("Fix it\n", TRAILER);
    assert_eq!(with_trailer(&once, TRAILER), once);
    let shouted = format!("Fix it\n\n{}\n", TRAILER.to_uppercase());
    assert_eq!(with_trailer(&shouted, TRAILER), shouted);
}

fn commit(repo: &Repository, parent: Option<Oid>, file: &str, message: &str, when: i64) -> Oid {
    let mut builder = repo.treebuilder(None).unwrap_or_else(|e| panic!("{e}"));
    if let Some(p) = parent {
        let tree = repo.find_commit(p).unwrap().tree().unwrap();
        builder = repo.treebuilder(Some(&tree)).unwrap();
    }
    let blob = repo.blob(file.as_bytes()).unwrap();
    builder.insert(file, blob, 0o100644).unwrap();
    let tree = repo.find_tree(builder.write().unwrap()).unwrap();
    let author = Signature::new("Model", "model@sandbox", &Time::new(when, 120)).unwrap();
    let committer = Signature::new("forgehand", "forgehand@localhost", &Time::new(when + 5, 0)).unwrap();
    let parents: Vec<_> = parent.map(|p| repo.find_commit(p).unwrap()).into_iter().collect();
    let parents: Vec<_> = parents.iter().collect();
    repo.commit(None, &author, &committer, message, &tree, &parents)
        .unwrap()
}

fn history(dir: &Path) -> (Repository, Oid, Vec<Oid>) {
    let repo = Repository::init(dir).unwrap();
    let base = commit(&repo, None, "base", "base\n", 1_700_000_000);
    let one = commit(&repo, Some(base), "one", "first change\n", 1_700_000_100);
    let two = commit(
        &repo,
        Some(one),
        "two",
        &format!("second change\n\n{TRAILER}\n"),
        1_700_000_200,
    );
    (repo, base, vec![one, two])
}

/// The commits from `head` down to `base`, newest first.
fn chain(repo: &Repository, base: Oid, head: Oid) -> Vec<Oid> {
    let mut out = Vec::new();
    let mut at = head;
    while at != base {
        out.push(at);
        at = repo.find_commit(at).unwrap().parent_id(0).unwrap();
    }
    out
}

#[test]
fn rewriting_keeps_trees_authors_dates_and_order_and_adds_the_trailer_once() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, base, old) = history(dir.path());
    let attribution = Attribution {
        co_author: Some(alice()),
        signer: None,
    };
    let mut done = HashMap::new();
    let head = rewrite(&repo, (base, old[1]), &attribution, &mut done).unwrap();
    let new = chain(&repo, base, head);
    assert_eq!(new.len(), 2);
    for (old, new) in [(old[1], new[0]), (old[0], new[1])] {
        let (old, new) = (repo.find_commit(old).unwrap(), repo.find_commit(new).unwrap());
        assert_eq!(old.tree_id(), new.tree_id());
        for (a, b) in [(old.author(), new.author()), (old.committer(), new.committer())] {
            assert_eq!((a.name(), a.email(), a.when()), (b.name(), b.email(), b.when()));
        }
        let message = new.message().unwrap();
        assert_eq!(message.matches(TRAILER).count(), 1, "{message}");
        let first = String::from_utf8_lossy(old.message_bytes())
            .lines()
            .next()
            .map(str::to_owned);
        assert_eq!(message.lines().next().map(str::to_owned), first);
    }
    // The same commits asked again (a later push) give the same ids,
    // and a commit on top builds on them.
    let three = commit(&repo, Some(old[1]), "three", "third\n", 1_700_000_300);
    let again = rewrite(&repo, (base, three), &attribution, &mut done).unwrap();
    assert_eq!(repo.find_commit(again).unwrap().parent_id(0).unwrap(), head);
}

#[test]
fn nothing_to_add_keeps_the_commits() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, base, old) = history(dir.path());
    let head = rewrite(
        &repo,
        (base, old[1]),
        &Attribution::default(),
        &mut HashMap::new(),
    )
    .unwrap();
    assert_eq!(head, old[1]);
}

fn ssh_keygen(dir: &Path) -> (String, String) {
    let key = dir.join("key");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "forgehand-test", "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen runs");
    assert!(made.success());
    let private = std::fs::read_to_string(&key).unwrap();
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (private, public)
}

#[test]
fn signed_commits_verify_with_git_and_a_wrong_key_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, base, old) = history(&dir.path().join("repo"));
    let (private, public) = ssh_keygen(dir.path());
    let signer = CommitSigner::from_openssh(&private).unwrap();
    assert_eq!(signer.public_key().split(' ').nth(1), public.split(' ').nth(1));
    let attribution = Attribution {
        co_author: Some(alice()),
        signer: Some(Arc::new(signer)),
    };
    let head = rewrite(&repo, (base, old[1]), &attribution, &mut HashMap::new()).unwrap();
    let allowed = dir.path().join("allowed_signers");
    std::fs::write(&allowed, format!("forgehand@localhost {public}")).unwrap();
    let verify = |oid: Oid, allowed: &Path| {
        Command::new("git")
            .arg("-C")
            .arg(dir.path().join("repo"))
            .arg("-c")
            .arg(format!("gpg.ssh.allowedSignersFile={}", allowed.display()))
            .args(["verify-commit", &oid.to_string()])
            .output()
            .unwrap()
    };
    for oid in chain(&repo, base, head) {
        let out = verify(oid, &allowed);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let (_, other) = ssh_keygen(&dir.path().join("repo"));
    std::fs::write(&allowed, format!("forgehand@localhost {other}")).unwrap();
    assert!(!verify(head, &allowed).status.success());
    assert!(!verify(old[1], &allowed).status.success(), "unsigned");
}

#[test]
fn bad_keys_are_refused_with_what_to_do() {
    let err = CommitSigner::from_openssh("not a key").unwrap_err();
    assert!(err.to_string().contains("OpenSSH private key"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("rsa");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ecdsa", "-N", "", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    let err = CommitSigner::from_openssh(&std::fs::read_to_string(&key).unwrap()).unwrap_err();
    assert!(err.to_string().contains("Ed25519"), "{err}");
    let (private, _) = ssh_keygen(dir.path());
    let signer = CommitSigner::from_openssh(&private).unwrap();
    assert!(!format!("{signer:?}").contains("PRIVATE"));
}
