/// What this build is: `pinproxy --version`, the `version` key of `started` and `stopped`, and the
/// version of the `.deb` that `.ci/build-deb` makes (it asks the built binary, so the three agree).
public enum BuildInfo {
    /// Semantic version; raise it with every release that changes behaviour.
    public static let version = "0.9.0"
}
