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
    // What a model in the sandbox may choose: a maintainer as author and
    // committer, dated long ago.
    let author = Signature::new("Mona Maintainer", "mona@example.org", &Time::new(when, 120)).unwrap();
    let committer = Signature::new("Mona Maintainer", "mona@example.org", &Time::new(when + 5, 0)).unwrap();
    let parents: Vec<_> = parent.map(|p| repo.find_commit(p).unwrap()).into_iter().collect();
    let parents: Vec<_> = parents.iter().collect();
    repo.commit(None, &author, &committer, message, &tree, &parents)
        .unwrap()
}

/// The model's own trailers, each claiming a person had a part.
const CLAIMS: &str = "Co-authored-by: Mona Maintainer <mona@example.org>\nSigned-off-by: Mona Maintainer <mona@example.org>\nreviewed-by:Lead <lead@example.org>\n";

fn history(dir: &Path) -> (Repository, Oid, Vec<Oid>) {
    let repo = Repository::init(dir).unwrap();
    let base = commit(&repo, None, "base", "base\n", 1_700_000_000);
    let one = commit(&repo, Some(base), "one", "first change\n", 1_700_000_100);
    let two = commit(
        &repo,
        Some(one),
        "two",
        &format!("second change\n\nWhy it changed.\n\n{CLAIMS}{TRAILER}\n"),
        1_700_000_200,
    );
    (repo, base, vec![one, two])
}

fn bot() -> Identity {
    Identity {
        name: "forgehand".into(),
        email: "forgehand@localhost".into(),
    }
}

fn attribution(co_author: Option<CoAuthor>, signer: Option<CommitSigner>) -> Attribution {
    Attribution {
        identity: bot(),
        co_author,
        signer: signer.map(Arc::new),
    }
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

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Each commit of `new` is forgehand's, dated no earlier than `since`, with
/// the tree of its counterpart in `old`, its subject, and no claim of the
/// model's left.
fn assert_forgehands(repo: &Repository, old: &[Oid], new: &[Oid], since: i64) {
    assert_eq!(new.len(), old.len());
    for (old, new) in old.iter().rev().zip(new) {
        let (old, new) = (repo.find_commit(*old).unwrap(), repo.find_commit(*new).unwrap());
        assert_eq!(old.tree_id(), new.tree_id());
        for person in [new.author(), new.committer()] {
            assert_eq!(
                (person.name().unwrap(), person.email().unwrap()),
                ("forgehand", "forgehand@localhost")
            );
            assert!(person.when().seconds() >= since, "dated at the rewrite");
        }
        let message = new.message().unwrap();
        assert!(
            !message.contains("Mona") && !message.contains("lead@"),
            "{message}"
        );
        let first = String::from_utf8_lossy(old.message_bytes())
            .lines()
            .next()
            .map(str::to_owned);
        assert_eq!(message.lines().next().map(str::to_owned), first);
    }
}

#[test]
fn rewriting_makes_the_commits_forgehands_and_adds_the_trailer_once() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, base, old) = history(dir.path());
    let attribution = attribution(Some(alice()), None);
    let mut done = HashMap::new();
    let since = now();
    let head = rewrite(&repo, (base, old[1]), &attribution, &mut done).unwrap();
    let new = chain(&repo, base, head);
    assert_forgehands(&repo, &old, &new, since);
    for oid in &new {
        let message = repo.find_commit(*oid).unwrap().message().unwrap().to_owned();
        assert_eq!(message.matches(TRAILER).count(), 1, "{message}");
    }
    assert_eq!(
        repo.find_commit(new[0]).unwrap().message().unwrap(),
        format!("second change\n\nWhy it changed.\n\n{TRAILER}\n")
    );
    // The same commits asked again (a later push) give the same ids,
    // and a commit on top builds on them.
    let three = commit(&repo, Some(old[1]), "three", "third\n", 1_700_000_300);
    let again = rewrite(&repo, (base, three), &attribution, &mut done).unwrap();
    assert_eq!(repo.find_commit(again).unwrap().parent_id(0).unwrap(), head);
}

#[test]
fn without_a_co_author_or_a_key_the_commits_are_still_forgehands() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, base, old) = history(dir.path());
    let since = now();
    let head = rewrite(
        &repo,
        (base, old[1]),
        &attribution(None, None),
        &mut HashMap::new(),
    )
    .unwrap();
    assert_ne!(head, old[1]);
    let new = chain(&repo, base, head);
    assert_forgehands(&repo, &old, &new, since);
    assert_eq!(
        repo.find_commit(new[0]).unwrap().message().unwrap(),
        "second change\n\nWhy it changed.\n"
    );
}

#[test]
fn trailers_that_name_a_person_are_dropped_and_others_kept() {
    for claim in [
        "Co-authored-by: M <m@x>",
        "co-authored-by:M <m@x>",
        "  Signed-off-by: M <m@x>",
        "Acked-by: M",
        "Reviewed-by: M",
        "Tested-by: M",
        "Reported-by: M",
        "Suggested-by: M",
        "Helped-by: M",
        "On-behalf-of: @org <o@x>",
        "Author: M <m@x>",
        "Committer : M <m@x>",
    ] {
        assert!(claims_identity(claim), "{claim}");
    }
    for kept in [
        "Fixes: #12",
        "Change-Id: I1234",
        "Refs: abc",
        "Thanks by mail: none",
        "by: x",
    ] {
        assert!(!claims_identity(kept), "{kept}");
    }
    assert_eq!(
        without_identity_trailers(
            "Fix\n\nCo-authored-by: M <m@x>\n\nBody.\n\nFixes: #1\nSigned-off-by: M <m@x>\n\n"
        ),
        "Fix\n\nBody.\n\nFixes: #1\n"
    );
    assert_eq!(without_identity_trailers("Signed-off-by: M <m@x>\n"), "");
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
    let attribution = attribution(Some(alice()), Some(signer));
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
