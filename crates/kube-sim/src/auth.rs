//! Authentication: bearer tokens mapped to identities (user name and
//! groups), including ServiceAccount identities
//! (`system:serviceaccount:<ns>:<name>`) and the built-in admin identity in
//! `system:masters`. Tokens never appear in Debug output or errors.

use crate::status::ApiError;
use std::collections::HashMap;
use std::sync::RwLock;

/// The admin user name.
pub const ADMIN_USER: &str = "kube-sim-admin";
/// The group that bypasses authorization.
pub const MASTERS: &str = "system:masters";
/// The group every authenticated identity has.
pub const AUTHENTICATED: &str = "system:authenticated";

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// User name.
    pub user: String,
    /// Groups.
    pub groups: Vec<String>,
}

impl Identity {
    /// A user with groups (plus `system:authenticated`).
    pub fn user(user: &str, groups: &[&str]) -> Self {
        let mut gs: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        if !gs.iter().any(|g| g == AUTHENTICATED) {
            gs.push(AUTHENTICATED.into());
        }
        Identity {
            user: user.into(),
            groups: gs,
        }
    }

    /// A ServiceAccount's identity.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Identity {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                AUTHENTICATED.into(),
            ],
        }
    }

    /// The identity of requests without credentials.
    pub fn anonymous() -> Self {
        Identity {
            user: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
        }
    }

    /// The admin identity.
    pub fn admin() -> Self {
        Identity::user(ADMIN_USER, &[MASTERS])
    }

    /// Whether authorization is bypassed (`system:masters`).
    pub fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }
}

/// Token → identity table.
pub struct Authenticator {
    tokens: RwLock<HashMap<String, Identity>>,
    admin_token: String,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.tokens.read().map(|t| t.len()).unwrap_or(0);
        f.debug_struct("Authenticator").field("tokens", &n).finish()
    }
}

impl Default for Authenticator {
    fn default() -> Self {
        Authenticator::new()
    }
}

/// A fresh random token.
pub fn random_token() -> String {
    let bytes: [u8; 24] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Authenticator {
    /// A table holding only a fresh admin token.
    pub fn new() -> Self {
        let admin_token = random_token();
        let mut tokens = HashMap::new();
        tokens.insert(admin_token.clone(), Identity::admin());
        Authenticator {
            tokens: RwLock::new(tokens),
            admin_token,
        }
    }

    /// The admin token.
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// Maps a token to an identity (replacing any previous mapping).
    pub fn add_token(&self, token: &str, identity: Identity) {
        if let Ok(mut t) = self.tokens.write() {
            t.insert(token.to_string(), identity);
        }
    }

    /// Issues a token for a user with groups.
    pub fn add_user(&self, user: &str, groups: &[&str]) -> String {
        let token = random_token();
        self.add_token(&token, Identity::user(user, groups));
        token
    }

    /// Issues a token for a ServiceAccount.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        let token = random_token();
        self.add_token(&token, Identity::service_account(namespace, name));
        token
    }

    /// The identity a token maps to.
    pub fn lookup(&self, token: &str) -> Option<Identity> {
        self.tokens.read().ok().and_then(|t| t.get(token).cloned())
    }

    /// Resolves an `Authorization` header value.
    pub fn authenticate(&self, header: Option<&str>) -> Result<Identity, ApiError> {
        let Some(h) = header else {
            return Ok(Identity::anonymous());
        };
        let token = h
            .strip_prefix("Bearer ")
            .or_else(|| h.strip_prefix("bearer "))
            .ok_or_else(ApiError::unauthorized)?
            .trim();
        self.tokens
            .read()
            .ok()
            .and_then(|t| t.get(token).cloned())
            .ok_or_else(ApiError::unauthorized)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_map_to_identities() {
        let auth = Authenticator::new();
        let admin = auth
            .authenticate(Some(&format!("Bearer {}", auth.admin_token())))
            .unwrap();
        assert!(admin.is_admin());
        let t = auth.add_user("alice", &["devs"]);
        let alice = auth.authenticate(Some(&format!("Bearer {t}"))).unwrap();
        assert_eq!(alice.user, "alice");
        assert_eq!(
            alice.groups,
            vec!["devs".to_string(), AUTHENTICATED.to_string()]
        );
        assert!(!alice.is_admin());
        let sa = auth.service_account_token("ns1", "bot");
        let bot = auth.authenticate(Some(&format!("Bearer {sa}"))).unwrap();
        assert_eq!(bot.user, "system:serviceaccount:ns1:bot");
        assert!(
            bot.groups
                .contains(&"system:serviceaccounts:ns1".to_string())
        );
    }

    #[test]
    fn unknown_tokens_are_unauthorized_and_missing_ones_anonymous() {
        let auth = Authenticator::new();
        assert_eq!(
            auth.authenticate(Some("Bearer nope")).unwrap_err().code,
            401
        );
        assert_eq!(auth.authenticate(None).unwrap().user, "system:anonymous");
    }

    #[test]
    fn debug_output_hides_tokens() {
        let auth = Authenticator::new();
        assert!(!format!("{auth:?}").contains(auth.admin_token()));
    }
}
