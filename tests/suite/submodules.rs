//! Submodules: fetched on the host from the forge (a relative URL resolved
//! against the superproject's address, with the forge's credential), their
//! files in the sandbox; one on a host the operator did not allow and one
//! whose `.gitmodules` URL reads the host's disk are not fetched, and the
//! progress comment says why; the model's edits inside a submodule are not
//! pushed, its gitlink stays, and the PR says what was left out. A
//! follow-up reads `.gitmodules` from the default branch, never the one
//! the model pushed: another repository it names is never fetched.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::git_http;
use forgehand_test_support::github_world::{Ended, World, DONE, REPO};
use forgehand_test_support::scripted_model::{run, text, GREET};

const GITMODULES: &str = "[submodule \"lib\"]\n\tpath = vendored/lib\n\turl = ../lib.git\n\
[submodule \"far\"]\n\tpath = vendored/far\n\turl = https://elsewhere.example/far.git\n\
[submodule \"disk\"]\n\tpath = vendored/disk\n\turl = file:///etc\n";

/// A commit no repository holds, for the gitlinks that are never fetched.
const NOWHERE: &str = "0123456789abcdef0123456789abcdef01234567";

fn git(bare: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forge_submodule_is_in_the_sandbox_others_are_refused_and_its_edits_are_not_pushed() {
    let look_and_edit = "echo \"lib=$(cat vendored/lib/lib.txt) others=$(find vendored/far vendored/disk -type f | wc -l)\" \
                         && echo 'patched by the model' >> vendored/lib/lib.txt && echo 'new' > vendored/lib/added.txt \
                         && echo '# greets' >> greet.py";
    let world = World::with_repository(
        vec![(run(look_and_edit), None), (text("Changed greet.py."), None)],
        &[("greet.py", GREET), (".gitmodules", GITMODULES)],
        "",
    )
    .await;
    let lib = git_http::bare_repo(&world.git.root, "acme/lib.git", &[("lib.txt", "lib v1\n")]);
    let lib_head = git_http::head_of(&lib, "main");
    git_http::add_gitlink(&world.bare, "main", "vendored/lib", &lib_head);
    git_http::add_gitlink(&world.bare, "main", "vendored/far", NOWHERE);
    git_http::add_gitlink(&world.bare, "main", "vendored/disk", NOWHERE);
    let Ended { issue, mut daemon } = world.run_to_end("Greet the world").await;
    assert!(daemon.terminate().success());
    let log = std::fs::read_to_string(world.log_path()).unwrap();
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{log}"
    );

    // The forge's submodule was in the sandbox; the others were empty.
    let seen: String = world
        .model
        .requests()
        .await
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert!(seen.contains("lib=lib v1 others=0"), "{seen}");

    // The progress comment says which were left out, and why.
    let progress = world.progress_comment(issue);
    assert!(
        progress.contains("Submodules checked out: `vendored/lib`"),
        "{progress}"
    );
    assert!(
        progress.contains("Submodules not fetched: ")
            && progress.contains("`vendored/far`: ")
            && progress.contains("elsewhere.example is not the forge's host"),
        "{progress}"
    );
    assert!(
        progress.contains("`vendored/disk`: a `file://` URL") && progress.contains("host's disk"),
        "{progress}"
    );

    // The superproject's change is pushed with the gitlink where it was,
    // and nothing of the submodule's files.
    let branch = format!("forgehand/issue-{issue}");
    assert!(git(&world.bare, &["show", &format!("{branch}:greet.py")]).contains("# greets"));
    let tree = git(&world.bare, &["ls-tree", "-r", &branch]);
    assert!(
        tree.contains(&format!("160000 commit {lib_head}\tvendored/lib")),
        "{tree}"
    );
    assert!(!tree.contains("lib.txt") && !tree.contains("added.txt"), "{tree}");
    // The submodule's own repository got nothing.
    assert_eq!(git_http::head_of(&lib, "main"), lib_head);
    assert_eq!(
        git(&lib, &["branch", "--format=%(refname)"]).trim(),
        "refs/heads/main"
    );

    // The PR says what was left out.
    let pr = &world.github.pulls(REPO)[0];
    assert!(
        pr.body
            .contains("Not pushed: edits inside the submodule `vendored/lib`")
            && pr.body.contains("changed lib.txt")
            && pr.body.contains("added added.txt"),
        "{}",
        pr.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_depth_limit_and_an_allowed_host_without_credentials_are_said_and_a_moved_gitlink_is_delivered() {
    let move_gitlink =
        "git update-index --cacheinfo 160000,$(cat LIB_V2),vendored/lib && git commit -qm 'Use lib v2' \
                        && echo \"deep=$(find vendored/lib/deep -type f | wc -l)\"";
    let world = World::with_repository(
        vec![
            (run(move_gitlink), None),
            (text("Moved the submodule to lib v2."), None),
        ],
        &[("greet.py", GREET)],
        "",
    )
    .await;
    let port = world.git.addr.port();
    // Another host name for the same loopback server: a host of its own,
    // which the operator allows, and which must not get the forge's token.
    let modules = format!(
        "[submodule \"lib\"]\n\tpath = vendored/lib\n\turl = ../lib.git\n\
         [submodule \"pub\"]\n\tpath = vendored/pub\n\turl = http://localhost:{port}/acme/pub.git\n"
    );
    let deep = git_http::bare_repo(&world.git.root, "acme/deep.git", &[("deep.txt", "deep\n")]);
    let lib = git_http::bare_repo(
        &world.git.root,
        "acme/lib.git",
        &[
            ("lib.txt", "lib v1\n"),
            (
                ".gitmodules",
                "[submodule \"deep\"]\n\tpath = deep\n\turl = ../deep.git\n",
            ),
        ],
    );
    git_http::add_gitlink(&lib, "main", "deep", &git_http::head_of(&deep, "main"));
    let lib_v1 = git_http::head_of(&lib, "main");
    let public = git_http::bare_repo(&world.git.root, "acme/pub.git", &[("pub.txt", "pub\n")]);
    git_http::push_commit(&world.bare, "main", ".gitmodules", &modules, "Add submodules");
    git_http::add_gitlink(&world.bare, "main", "vendored/lib", &lib_v1);
    git_http::add_gitlink(
        &world.bare,
        "main",
        "vendored/pub",
        &git_http::head_of(&public, "main"),
    );
    git_http::push_commit(&lib, "main", "lib.txt", "lib v2\n", "lib v2");
    let lib_v2 = git_http::head_of(&lib, "main");
    git_http::push_commit(&world.bare, "main", "LIB_V2", &lib_v2, "Name lib v2");
    // The rig's config has a `git:` section already: the settings go in it.
    let config = std::fs::read_to_string(&world.config).unwrap().replacen(
        "git:\n",
        &format!("git:\n  submodules:\n    depth: 1\n    allowed_hosts: [\"localhost:{port}\"]\n"),
        1,
    );
    std::fs::write(&world.config, config).unwrap();

    let Ended { issue, mut daemon } = world.run_to_end("Use lib v2").await;
    assert!(daemon.terminate().success());
    let log = std::fs::read_to_string(world.log_path()).unwrap();
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{log}"
    );

    let progress = world.progress_comment(issue);
    assert!(
        progress.contains("`vendored/lib/deep`: deeper than `git.submodules.depth` (1)"),
        "{progress}"
    );
    // The allowed host was asked anonymously; this server wants a token,
    // which forgehand gives only to the forge's own address.
    assert!(
        progress.contains("`vendored/pub`: the fetch from http://localhost")
            && progress.contains("no token is configured for this remote"),
        "{progress}"
    );
    let seen: String = world
        .model
        .requests()
        .await
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert!(seen.contains("deep=0"), "{seen}");

    // The gitlink the model moved on purpose is delivered as that change.
    let branch = format!("forgehand/issue-{issue}");
    let tree = git(&world.bare, &["ls-tree", "-r", &branch]);
    assert!(
        tree.contains(&format!("160000 commit {lib_v2}\tvendored/lib")),
        "{tree}"
    );
    let pr = &world.github.pulls(REPO)[0];
    assert!(
        pr.body.contains("The change moves the submodule `vendored/lib`")
            && pr.body.contains("has that commit"),
        "{}",
        pr.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_only_inside_a_submodule_push_nothing_and_the_progress_comment_says_so() {
    let edit_inside =
        "echo 'patched by the model' >> vendored/lib/lib.txt && git add -A && git status --short";
    let world = World::with_repository(
        vec![(run(edit_inside), None), (text("Patched the library."), None)],
        &[
            ("greet.py", GREET),
            (
                ".gitmodules",
                "[submodule \"lib\"]\n\tpath = vendored/lib\n\turl = ../lib.git\n",
            ),
        ],
        "",
    )
    .await;
    let lib = git_http::bare_repo(&world.git.root, "acme/lib.git", &[("lib.txt", "lib v1\n")]);
    let lib_head = git_http::head_of(&lib, "main");
    git_http::add_gitlink(&world.bare, "main", "vendored/lib", &lib_head);
    let Ended { issue, mut daemon } = world.run_to_end("Patch the library").await;
    assert!(daemon.terminate().success());
    let log = std::fs::read_to_string(world.log_path()).unwrap();
    let progress = world.progress_comment(issue);
    assert!(
        progress.contains("Not pushed: edits inside the submodule `vendored/lib` (changed lib.txt)"),
        "{progress}\n{log}"
    );
    assert!(progress.contains("without changing any file"), "{progress}");
    assert!(world.github.pulls(REPO).is_empty());
    assert_eq!(git(&world.bare, &["branch", "--list", "forgehand/*"]).trim(), "");
    assert_eq!(git_http::head_of(&lib, "main"), lib_head);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_url_is_fetched_once_the_superproject_itself_is_refused_and_an_added_gitlink_is_said() {
    // As `git submodule add` leaves it: the gitlink, its (empty) folder
    // and its `.gitmodules` section.
    let add_submodule = format!(
        "mkdir -p vendored/new && git update-index --add --cacheinfo 160000,{NOWHERE},vendored/new \
         && printf '[submodule \"new\"]\\n\\tpath = vendored/new\\n\\turl = ../new.git\\n' >> .gitmodules \
         && git add .gitmodules && git commit -qm 'Add a submodule'"
    );
    let world = World::with_repository(
        vec![
            (run(&add_submodule), None),
            (text("Added the new submodule."), None),
        ],
        &[
            ("greet.py", GREET),
            (
                ".gitmodules",
                "[submodule \"lib\"]\n\tpath = vendored/lib\n\turl = ../lib.git\n\
                 [submodule \"again\"]\n\tpath = vendored/again\n\turl = ../lib.git\n\
                 [submodule \"self\"]\n\tpath = vendored/self\n\turl = ../app.git\n",
            ),
        ],
        "",
    )
    .await;
    let lib = git_http::bare_repo(&world.git.root, "acme/lib.git", &[("lib.txt", "lib v1\n")]);
    let lib_head = git_http::head_of(&lib, "main");
    git_http::add_gitlink(&world.bare, "main", "vendored/lib", &lib_head);
    git_http::add_gitlink(&world.bare, "main", "vendored/again", &lib_head);
    git_http::add_gitlink(&world.bare, "main", "vendored/self", NOWHERE);
    let Ended { issue, mut daemon } = world.run_to_end("Add a submodule").await;
    assert!(daemon.terminate().success());
    let log = std::fs::read_to_string(world.log_path()).unwrap();
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{log}"
    );

    let progress = world.progress_comment(issue);
    assert!(
        progress.contains("`vendored/lib` at") && progress.contains("`vendored/again` at"),
        "{progress}"
    );
    assert!(
        progress.contains("`vendored/self`: its URL names the superproject itself"),
        "{progress}"
    );
    // One URL, one fetch, however many submodules name it.
    let lib_fetches = log
        .lines()
        .filter(|l| l.contains("fetched into the mirror") && l.contains("/acme/lib.git"))
        .count();
    assert_eq!(lib_fetches, 1, "{log}");

    // A submodule the model added is said as such, and so is `.gitmodules`.
    let branch = format!("forgehand/issue-{issue}");
    let tree = git(&world.bare, &["ls-tree", "-r", &branch]);
    assert!(
        tree.contains(&format!("160000 commit {NOWHERE}\tvendored/new")),
        "{tree}"
    );
    let pr = &world.github.pulls(REPO)[0];
    assert!(
        pr.body.contains("The change adds a submodule at `vendored/new`")
            && pr.body.contains("The change edits `.gitmodules`"),
        "{}",
        pr.body
    );
    assert!(
        progress.contains("The change adds a submodule at `vendored/new`"),
        "{progress}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_never_fetches_a_repository_the_models_gitmodules_names() {
    let look = "echo \"lib=$(cat vendored/lib/*.txt 2>&1 | head -3)\"";
    let repoint = "git config -f .gitmodules submodule.lib.url ../../other-org/private.git \
                   && git update-index --cacheinfo 160000,$(cat PRIVATE_HEAD),vendored/lib \
                   && echo '# again' >> greet.py && git add .gitmodules greet.py \
                   && git commit -qm 'Use the other library'";
    let world = World::with_repository(
        vec![
            (run(look), None),
            (run(repoint), None),
            (text("Switched the library."), None),
        ],
        &[("greet.py", GREET), ("README.md", "# app\n")],
        "triggers:\n  review_quiet: \"2s\"\n",
    )
    .await;
    let lib = git_http::bare_repo(&world.git.root, "acme/lib.git", &[("lib.txt", "lib v1\n")]);
    // Another organisation's repository on the same forge, which the
    // token can read.
    let private = git_http::bare_repo(
        &world.git.root,
        "other-org/private.git",
        &[("secret.txt", "the other organisation's private plans\n")],
    );
    let modules = "[submodule \"lib\"]\n\tpath = vendored/lib\n\turl = ../lib.git\n";
    git_http::push_commit(&world.bare, "main", ".gitmodules", modules, "Add the library");
    git_http::add_gitlink(
        &world.bare,
        "main",
        "vendored/lib",
        &git_http::head_of(&lib, "main"),
    );
    let private_head = git_http::head_of(&private, "main");
    git_http::push_commit(
        &world.bare,
        "main",
        "PRIVATE_HEAD",
        &private_head,
        "Name a commit",
    );

    let issue = world.labelled_issue("Use the other library");
    let mut daemon = world.start();
    let pull = world.follow_up_by_review(issue, &daemon, "README.md").await;
    assert!(daemon.terminate().success());

    // The model pushed a `.gitmodules` naming the other repository, and a
    // gitlink to its commit.
    let branch = format!("forgehand/issue-{issue}");
    assert!(
        git(&world.bare, &["show", &format!("{branch}:.gitmodules")]).contains("../../other-org/private.git")
    );
    let tree = git(&world.bare, &["ls-tree", "-r", &branch]);
    assert!(
        tree.contains(&format!("160000 commit {private_head}\tvendored/lib")),
        "{tree}"
    );
    // The first run had the library; nothing of the other repository was
    // ever in a sandbox.
    let progress = world.progress_comment(pull);
    let seen: String = world
        .model
        .requests()
        .await
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert!(!seen.contains("private plans"), "{progress}");
    assert!(seen.contains("lib=lib v1"), "{seen}");
    // The follow-up took the submodule's URL from the default branch: the
    // library's repository has no such commit, so it was left out, said.
    assert!(
        progress.contains("`vendored/lib`: ") && progress.contains("has no branch holding the commit"),
        "{progress}"
    );
    assert!(progress.contains("/acme/lib.git"), "{progress}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_never_fetches_with_the_token_what_a_moved_gitlinks_own_gitmodules_names() {
    // The library's repository has a branch (anyone's) whose own
    // `.gitmodules` names another organisation's private repository; the
    // model moves the library's gitlink to it, and the follow-up's second
    // level of submodules would read that `.gitmodules`.
    let look = "echo \"lib=$(cat vendored/lib/lib.txt 2>&1 | head -3)\"";
    let repoint = "git update-index --cacheinfo 160000,$(cat NESTING_HEAD),vendored/lib \
                   && echo '# again' >> greet.py && git add greet.py \
                   && git commit -qm 'Use the nesting library'";
    let world = World::with_repository(
        vec![
            (run(look), None),
            (run(repoint), None),
            (text("Moved the library."), None),
        ],
        &[("greet.py", GREET), ("README.md", "# app\n")],
        "triggers:\n  review_quiet: \"2s\"\n",
    )
    .await;
    let lib = git_http::bare_repo(&world.git.root, "acme/lib.git", &[("lib.txt", "lib v1\n")]);
    let private = git_http::bare_repo(
        &world.git.root,
        "other-org/private.git",
        &[("secret.txt", "the other organisation's private plans\n")],
    );
    let nesting = "[submodule \"inner\"]\n\tpath = inner\n\turl = ../../other-org/private.git\n";
    git_http::push_commit(&lib, "nesting", ".gitmodules", nesting, "Nest a repository");
    git_http::add_gitlink(&lib, "nesting", "inner", &git_http::head_of(&private, "main"));
    let modules = "[submodule \"lib\"]\n\tpath = vendored/lib\n\turl = ../lib.git\n";
    git_http::push_commit(&world.bare, "main", ".gitmodules", modules, "Add the library");
    git_http::add_gitlink(
        &world.bare,
        "main",
        "vendored/lib",
        &git_http::head_of(&lib, "main"),
    );
    let nesting_head = git_http::head_of(&lib, "nesting");
    git_http::push_commit(
        &world.bare,
        "main",
        "NESTING_HEAD",
        &nesting_head,
        "Name a commit",
    );

    let issue = world.labelled_issue("Use the nesting library");
    let mut daemon = world.start();
    let pull = world.follow_up_by_review(issue, &daemon, "README.md").await;
    assert!(daemon.terminate().success());

    let tree = git(
        &world.bare,
        &["ls-tree", "-r", &format!("forgehand/issue-{issue}")],
    );
    assert!(
        tree.contains(&format!("160000 commit {nesting_head}\tvendored/lib")),
        "{tree}"
    );
    let seen: String = world
        .model
        .requests()
        .await
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert!(seen.contains("lib=lib v1"), "{seen}");
    // The follow-up fetched the moved library (its URL is the default
    // branch's), but what that commit's `.gitmodules` names only without
    // the token, which the forge refuses: it was never in a sandbox.
    assert!(!seen.contains("private plans"), "{seen}");
    let progress = world.progress_comment(pull);
    assert!(
        progress.contains("`vendored/lib/inner`: ") && progress.contains("without the forge's token"),
        "{progress}"
    );
}
