/// The one rule about backups, said the same way by `pinproxy pin`, `pinproxy check` and the log.
///
/// A rule has a real backup when one of its pins is either a key that is not in the chain the server
/// serves (a spare key kept offline, or another CA), or a CA pin (`at: ca`) the operator marked
/// `backup: true`. A CA pin in the served chain keeps the rule working across a leaf key change only
/// by accepting any key that CA certifies for the name: a choice the policy states, not a default.
public enum BackupRule {
    /// What a real backup is, in the words every warning and the ready rule of `pin` use.
    public static let advice = "a real backup is a key not in the served chain (a spare kept offline: '{ file: next-key.pub.pem, at: leaf, label: backup }') or a CA pin marked 'backup: true' (then any key that CA certifies for the name passes)"
}

extension Rule {
    /// The pin entry marked `backup: true`, if any.
    public var acceptedBackup: PinEntry? { pins.first(where: \.acceptedBackup) }

    /// What `check` can tell without the server's chain: a rule of one leaf key and only unmarked CA
    /// pins has no real backup, since the CA that issued the leaf sits in the same chain. Returns
    /// the first such CA pin. (Two leaf keys, or two CAs, may be a key and its spare: only the
    /// served chain tells, and the log says so when every pin matched it.)
    public var caPinInServedChain: PinEntry? {
        guard acceptedBackup == nil else { return nil }
        let leafPins = Set(pins.filter { $0.position == .leaf }.map(\.pin))
        let caPins = pins.filter { $0.position == .ca && !leafPins.contains($0.pin) }
        guard leafPins.count == 1, !caPins.isEmpty, leafPins.count + caPins.count == pins.count else { return nil }
        return caPins.first
    }
}

extension PinEntry {
    /// A `file:` pin that holds a public key and no certificate: by the workflow's convention a key
    /// kept offline (no server serves a bare key), so a spare, whatever its `at:` says.
    public var isKeyFile: Bool { file != nil && notAfter == nil }
}

extension Rule {
    /// What `check` can tell of `at: any` pins (the default for SPKI pins, and all that
    /// network_security_config.xml, OkHttp or TrustKit pins can say): when no pin is marked
    /// `backup: true`, none is a key file, and at most one leaf key is named, the `at: any` pins
    /// may be the issuing CA's key or the server's own, in the chain the server serves, and then
    /// every pin matches it and the log says `no_real_backup`. Returns those pins (empty when the
    /// rule rules that out). Saying `at: leaf` or `at: ca` lets `check` tell.
    public var unplacedPinsInServedChain: [PinEntry] {
        guard acceptedBackup == nil, Set(pins.map(\.pin)).count >= 2, !pins.contains(where: \.isKeyFile) else { return [] }
        guard Set(pins.filter { $0.position == .leaf }.map(\.pin)).count <= 1 else { return [] }  // two leaf keys: one is a spare
        return pins.filter { $0.position == .any }
    }
}
