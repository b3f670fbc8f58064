//! Where a forge keeps the files people upload to its threads, and what may
//! be fetched from there: the only hosts forgehand downloads images from,
//! and the only one its credential goes to.
//!
//! - GitHub: `<web host>/user-attachments/assets/<id>` (and the older
//!   `<web host>/<owner>/<repo>/assets/<n>/<id>`), which redirect to
//!   `private-user-images.githubusercontent.com` with a signed token in the
//!   address; on github.com links straight to `*.githubusercontent.com`
//!   image hosts too. The web host is the API's (`api.github.com` ->
//!   `github.com`, GitHub Enterprise Server's `/api/v3` dropped).
//! - GitLab: the project's uploads, `/uploads/<secret>/<file>` as markdown
//!   writes it (relative to the project), `<base>/<project>/uploads/...`
//!   and `<base>/-/project/<id>/uploads/...`, on the instance's own host.

use reqwest::Url;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UploadSite {
    GitHub {
        /// The web address (`https://github.com`, or a GHES host).
        web: Url,
        /// github.com itself: its uploads redirect to githubusercontent.com.
        dotcom: bool,
    },
    GitLab {
        /// The instance's address, a path prefix kept (ends with `/`).
        base: Url,
        /// The project's path, `group/name`.
        project: String,
    },
}

/// github.com's image hosts its uploads live on (or redirect to).
const GITHUB_IMAGE_HOSTS: &str = ".githubusercontent.com";

impl UploadSite {
    /// GitHub's uploads for the API at `api_url`.
    pub fn github(api_url: &str) -> Option<UploadSite> {
        let api = Url::parse(api_url).ok()?;
        let dotcom = api.host_str() == Some("api.github.com");
        let mut web = api.clone();
        if dotcom {
            web.set_host(Some("github.com")).ok()?;
        }
        let path = api.path().trim_end_matches('/');
        let path = path
            .strip_suffix("/api/v3")
            .unwrap_or(if dotcom { "" } else { path });
        web.set_path(&format!("{path}/"));
        web.set_query(None);
        Some(UploadSite::GitHub { web, dotcom })
    }

    /// The uploads of GitLab project `project` on the instance at `url`.
    pub fn gitlab(url: &str, project: &str) -> Option<UploadSite> {
        let mut base = Url::parse(url).ok()?;
        let path = format!("{}/", base.path().trim_end_matches('/'));
        base.set_path(&path);
        base.set_query(None);
        Some(UploadSite::GitLab {
            base,
            project: project.trim_matches('/').to_owned(),
        })
    }

    fn home(&self) -> &Url {
        match self {
            UploadSite::GitHub { web, .. } => web,
            UploadSite::GitLab { base, .. } => base,
        }
    }

    /// The address to download `link` from when it is one of this forge's
    /// uploads; `None` for anything else (never fetched).
    pub fn upload_url(&self, link: &str) -> Option<Url> {
        let home = self.home();
        let url = match self {
            UploadSite::GitLab { project, .. } if link.starts_with("/uploads/") => {
                home.join(&format!("{project}{link}")).ok()?
            }
            UploadSite::GitLab { .. } if link.starts_with("/-/project/") => home.join(&link[1..]).ok()?,
            _ => Url::parse(link).ok()?,
        };
        if !matches!(url.scheme(), "http" | "https") || !url.username().is_empty() || url.password().is_some()
        {
            return None;
        }
        // The path after the forge's own prefix, dot segments resolved.
        let own = same_origin(&url, home)
            .then(|| url.path().strip_prefix(home.path()))
            .flatten();
        let taken = match (self, own) {
            (UploadSite::GitHub { .. }, Some(path)) => {
                let segments: Vec<&str> = path.split('/').collect();
                path.starts_with("user-attachments/assets/")
                    || (segments.len() >= 4 && segments[2] == "assets")
            }
            (UploadSite::GitHub { dotcom: true, .. }, None) => {
                url.scheme() == "https"
                    && url.port().is_none()
                    && url.host_str().is_some_and(|h| {
                        h == "private-user-images.githubusercontent.com"
                            || h == "user-images.githubusercontent.com"
                    })
            }
            (UploadSite::GitLab { project, .. }, Some(path)) => {
                let in_project = path
                    .strip_prefix(project.as_str())
                    .and_then(|rest| rest.strip_prefix("/uploads/"));
                let by_id = path
                    .strip_prefix("-/project/")
                    .and_then(|rest| rest.split_once("/uploads/"))
                    .filter(|(id, _)| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
                    .map(|(_, rest)| rest);
                in_project
                    .or(by_id)
                    .is_some_and(|rest| rest.split('/').count() == 2)
            }
            _ => false,
        };
        taken.then_some(url)
    }

    /// Whether a redirect from an upload to `url` may be followed: the
    /// forge's own host, and on github.com its image hosts (over HTTPS).
    pub fn may_follow(&self, url: &Url) -> bool {
        if self.takes_credential(url) {
            return true;
        }
        match self {
            UploadSite::GitHub { dotcom: true, .. } => {
                url.scheme() == "https"
                    && url.port().is_none()
                    && url.host_str().is_some_and(|h| h.ends_with(GITHUB_IMAGE_HOSTS))
            }
            _ => false,
        }
    }

    /// Whether the forge's credential goes with a request to `url`: only
    /// to the forge's own web host.
    pub fn takes_credential(&self, url: &Url) -> bool {
        same_origin(url, self.home())
    }

    /// The header that carries the token: GitHub's `Authorization: Bearer`,
    /// GitLab's `PRIVATE-TOKEN`.
    pub fn credential_header(&self, token: &str) -> (&'static str, String) {
        match self {
            UploadSite::GitHub { .. } => ("authorization", format!("Bearer {token}")),
            UploadSite::GitLab { .. } => ("private-token", token.to_owned()),
        }
    }
}

fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(site: &UploadSite, link: &str) -> Option<String> {
        site.upload_url(link).map(|u| u.to_string())
    }

    #[test]
    fn github_takes_its_attachments_and_nothing_else() {
        let site = UploadSite::github("https://api.github.com").unwrap();
        let asset = "https://github.com/user-attachments/assets/0b1c2d3e-aaaa-bbbb-cccc-000000000001";
        assert_eq!(taken(&site, asset).as_deref(), Some(asset));
        assert!(taken(&site, "https://github.com/acme/app/assets/12/0b1c2d3e").is_some());
        assert!(taken(&site, "https://user-images.githubusercontent.com/1/shot.png").is_some());
        for other in [
            "https://example.org/user-attachments/assets/1",
            "http://github.com/user-attachments/assets/1",
            "https://github.com/acme/app/raw/main/shot.png",
            "https://github.com/user-attachments/assets/../../login",
            "https://evil.githubusercontent.com.example.org/1.png",
            "https://token@github.com/user-attachments/assets/1",
            "/uploads/ab/x.png",
        ] {
            assert_eq!(taken(&site, other), None, "{other}");
        }
        let redirect = Url::parse("https://private-user-images.githubusercontent.com/1/x.png?jwt=e").unwrap();
        assert!(site.may_follow(&redirect));
        assert!(!site.takes_credential(&redirect));
        assert!(site.takes_credential(&Url::parse(asset).unwrap()));
        assert!(!site.may_follow(&Url::parse("https://example.org/x.png").unwrap()));
    }

    #[test]
    fn an_enterprise_server_keeps_its_host_and_follows_no_other() {
        let site = UploadSite::github("https://ghe.example.com/api/v3").unwrap();
        assert!(taken(&site, "https://ghe.example.com/user-attachments/assets/1").is_some());
        assert_eq!(
            taken(&site, "https://user-images.githubusercontent.com/1/shot.png"),
            None
        );
        let elsewhere = Url::parse("https://private-user-images.githubusercontent.com/1").unwrap();
        assert!(!site.may_follow(&elsewhere));
    }

    #[test]
    fn gitlab_takes_the_projects_uploads_on_its_own_host() {
        let site = UploadSite::gitlab("https://gitlab.example.com/git", "acme/app").unwrap();
        assert_eq!(
            taken(&site, "/uploads/66dbcd21ec5d24ed6ea225176098d52b/dk.png").as_deref(),
            Some("https://gitlab.example.com/git/acme/app/uploads/66dbcd21ec5d24ed6ea225176098d52b/dk.png")
        );
        assert!(taken(&site, "/-/project/1234/uploads/66dbcd21/dk.png").is_some());
        assert!(taken(&site, "https://gitlab.example.com/git/acme/app/uploads/ab/dk.png").is_some());
        for other in [
            "https://gitlab.example.com/git/acme/other/uploads/ab/dk.png",
            "https://gitlab.example.com/git/acme/app/-/raw/main/dk.png",
            "/uploads/ab/../../../../admin/x.png",
            "/-/project/x/uploads/ab/dk.png",
            "https://cdn.example.com/git/acme/app/uploads/ab/dk.png",
        ] {
            assert_eq!(taken(&site, other), None, "{other}");
        }
        assert_eq!(site.credential_header("t"), ("private-token", "t".to_owned()));
    }
}
