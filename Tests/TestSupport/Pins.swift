/// Pins of the fixture PKI (Fixtures/expected-pins.txt, computed by the openssl CLI).
public enum Pins {
    public static let leafEC = "spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="
    public static let leafRSA = "spki-sha256:7lBrKZ9S7afn2Xb2oN0mgOLh1UvmIixsKeVyj3Hm4do="
    public static let leafRotated = "spki-sha256:X9/WHalK5bPHRZjwThI0cxSoKn8dlaHbLnd4zX9Qmcg="
    public static let intermediate = "spki-sha256:KCDrug7ej6zlHN6aFwgek+aRk6ExpqGsKfgGdPF+qhM="
    public static let root = "spki-sha256:8xYmeC9Eb+1x3jKAb5kV+2ORTfldeg/FMzwVSTm3ptc="
    public static let rogueLeaf = "spki-sha256:GpJMWznZg/+avOl3K8cJqwDXioJFfLZdlJTvnCoJ960="
    public static let selfSignedCert = "cert-sha256:Ncm0WCZv0rGGOQ6fWFFLAIhu1HP3Bb2fkHk3lqk/RFc="
    public static let backup = "spki-sha256:WwVBfKtcnP1H4GTEAlaKbG5eqHWzhDIdOZvcYdtyivk="
}
