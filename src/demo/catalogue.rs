//! Deterministic fake catalogue data: the same titles, prices and stock on every run.

/// One manga volume of the fake store.
#[derive(Debug, Clone, Copy)]
pub struct Volume {
    pub id: &'static str,
    pub isbn: &'static str,
    pub title_ja: &'static str,
    pub title_en: &'static str,
    pub volume: u32,
    pub genre: &'static str,
    pub price_jpy: u32,
    pub stock_tokyo: u32,
    pub stock_osaka: u32,
}

macro_rules! volumes {
    ($(($id:literal, $isbn:literal, $ja:literal, $en:literal, $vol:literal, $genre:literal, $price:literal, $tokyo:literal, $osaka:literal)),* $(,)?) => {
        &[$(Volume { id: $id, isbn: $isbn, title_ja: $ja, title_en: $en, volume: $vol, genre: $genre, price_jpy: $price, stock_tokyo: $tokyo, stock_osaka: $osaka }),*]
    };
}

/// The whole catalogue.
pub const VOLUMES: &[Volume] = volumes![
    ("MNG-00000001", "9784088835457", "ワンピース", "One Piece", 100, "shonen", 528, 42, 17),
    ("MNG-00000002", "9784088836461", "ワンピース", "One Piece", 101, "shonen", 528, 35, 0),
    ("MNG-00000003", "9784088837703", "ワンピース", "One Piece", 105, "shonen", 550, 0, 0),
    ("MNG-00000004", "9784088824345", "鬼滅の刃", "Demon Slayer", 1, "shonen", 484, 12, 9),
    ("MNG-00000005", "9784088825106", "鬼滅の刃", "Demon Slayer", 23, "shonen", 484, 7, 3),
    ("MNG-00000006", "9784088827773", "呪術廻戦", "Jujutsu Kaisen", 1, "shonen", 484, 20, 11),
    ("MNG-00000007", "9784088833415", "チェンソーマン", "Chainsaw Man", 1, "shonen", 528, 5, 8),
    ("MNG-00000008", "9784088828411", "SPY×FAMILY", "Spy x Family", 1, "shonen", 528, 30, 25),
    ("MNG-00000009", "9784063842760", "進撃の巨人", "Attack on Titan", 1, "shonen", 495, 14, 6),
    ("MNG-00000010", "9784063954364", "進撃の巨人", "Attack on Titan", 34, "shonen", 495, 0, 2),
    ("MNG-00000011", "9784088725093", "NARUTO―ナルト―", "Naruto", 1, "shonen", 462, 9, 4),
    ("MNG-00000012", "9784091270665", "名探偵コナン", "Case Closed", 100, "shonen", 506, 16, 12),
    ("MNG-00000013", "9784088519470", "ドラゴンボール", "Dragon Ball", 1, "shonen", 462, 22, 10),
    ("MNG-00000014", "9784088826608", "僕のヒーローアカデミア", "My Hero Academia", 1, "shonen", 484, 18, 0),
    ("MNG-00000015", "9784065139417", "ヴィンランド・サガ", "Vinland Saga", 1, "seinen", 693, 4, 3),
    ("MNG-00000016", "9784592143796", "ベルセルク", "Berserk", 1, "seinen", 660, 6, 2),
    (
        "MNG-00000017",
        "9784091882011",
        "葬送のフリーレン",
        "Frieren: Beyond Journey's End",
        1,
        "shonen",
        528,
        40,
        31
    ),
    ("MNG-00000018", "9784091853219", "ブルーピリオド", "Blue Period", 1, "seinen", 715, 3, 0),
    ("MNG-00000019", "9784088446585", "君に届け", "Kimi ni Todoke", 1, "shojo", 462, 8, 5),
    ("MNG-00000020", "9784088470597", "フルーツバスケット", "Fruits Basket", 1, "shojo", 495, 11, 7),
    ("MNG-00000021", "9784063407457", "ちはやふる", "Chihayafuru", 1, "josei", 495, 2, 4),
    ("MNG-00000022", "9784592217329", "ハチミツとクローバー", "Honey and Clover", 1, "josei", 550, 0, 1),
    ("MNG-00000023", "9784091404367", "ドラえもん", "Doraemon", 1, "kodomo", 440, 25, 19),
    ("MNG-00000024", "9784063846300", "よつばと！", "Yotsuba&!", 1, "kodomo", 770, 13, 9),
    ("MNG-00000025", "9784088832111", "ダンダダン", "Dandadan", 1, "shonen", 528, 19, 14),
    ("MNG-00000026", "9784065295175", "ブルーロック", "Blue Lock", 1, "shonen", 528, 21, 16),
    ("MNG-00000027", "9784040649887", "ダンジョン飯", "Delicious in Dungeon", 1, "seinen", 748, 10, 8),
    ("MNG-00000028", "9784088814926", "ハイキュー!!", "Haikyu!!", 1, "shonen", 462, 15, 13),
    (
        "MNG-00000029",
        "9784065119341",
        "かぐや様は告らせたい",
        "Kaguya-sama: Love Is War",
        1,
        "seinen",
        693,
        9,
        6
    ),
    ("MNG-00000030", "9784088922386", "薬屋のひとりごと", "The Apothecary Diaries", 1, "josei", 715, 12, 10),
];

/// Finds a volume by product id.
pub fn by_id(id: &str) -> Option<&'static Volume> {
    VOLUMES.iter().find(|v| v.id == id)
}

/// Finds a volume by ISBN-13 (dashes ignored).
pub fn by_isbn(isbn: &str) -> Option<&'static Volume> {
    let wanted: String = isbn.chars().filter(char::is_ascii_digit).collect();
    VOLUMES.iter().find(|v| v.isbn == wanted)
}
