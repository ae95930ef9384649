from retrieval.text.tokenize import (
    CHINESE_STOPWORDS,
    TOKENIZER_NAME,
    TOKENIZER_V1,
    analyser,
    corpus_language,
    document_language,
    reindex_note,
    tokenize,
    tokenize_v1,
)


def test_english_analyser_lowercases_drops_stopwords_and_stems():
    assert tokenize("The Running dogs are in the PARK.") == ["run", "dog", "park"]


def test_chinese_is_segmented_by_jieba():
    assert tokenize("我爱自然语言处理") == ["爱", "自然语言", "处理"]  # 我: a function word


def test_mixed_text_in_one_pass_with_nfkc():
    # Full-width digits become ASCII; punctuation separates and is dropped.
    assert tokenize("北京大学的Transformers模型，２０２４年！") == ["北京大学", "transform", "模型", "2024", "年"]


def test_language_detection():
    assert document_language("机器学习是人工智能的一个分支") == "zh"
    assert document_language("Machine learning is a branch of AI") == "en"
    assert corpus_language(["hello world"] * 99 + ["你好世界"]) == "mixed"
    assert corpus_language(["你好世界"] * 10) == "zh"
    assert corpus_language(["hello"] * 200) == "en"


def test_one_letter_latin_words_are_dropped_digits_and_han_characters_kept():
    # "I", the "e" and "g" of "e.g.", an initial: rare in documents, so heavily weighted, never meant.
    assert tokenize("I am interested in e.g. tumours, J. Smith") == ["am", "interest", "tumour", "smith"]
    assert tokenize("Ｉ ｘ 7 b2 队 年") == ["7", "b2", "队", "年"]


def test_chinese_function_words_are_dropped_words_containing_them_kept():
    assert tokenize("黑豹队的防守丢了多少分？") == ["黑豹", "队", "防守", "丢", "多少", "分"]
    assert tokenize("在于是否") == ["在于", "是否"]  # jieba keeps these words whole: not stopwords
    assert {"的", "了", "是", "在"} <= CHINESE_STOPWORDS and len(CHINESE_STOPWORDS) == 119


def test_a_fraction_is_one_token_however_it_is_written():
    # NFKC turns ½ into "1⁄2", which ran into the 6 ("61", "2") before.
    for text in ("6½ inches", "6 ½ inches", "6 1/2 inches", "6 1⁄2 inches"):
        assert tokenize(text) == ["6", "1/2", "inch"], text
    assert tokenize("¾") == ["3/4"]
    # A date or a path of numbers is not a fraction; "24/7" is one.
    assert tokenize("2020/01/02 24/7") == ["2020", "01", "02", "24/7"]


def test_the_v1_analyser_is_kept_for_collections_built_with_it():
    assert tokenize_v1("I am 6½, e.g. 黑豹队的") == ["i", "am", "61", "2", "e", "g", "黑豹", "队", "的"]
    assert analyser(TOKENIZER_V1) is tokenize_v1
    assert analyser(TOKENIZER_NAME) is tokenize and TOKENIZER_NAME != TOKENIZER_V1
    assert analyser("written by hand") is tokenize
    assert reindex_note(TOKENIZER_NAME) is None and reindex_note("written by hand") is None
    assert TOKENIZER_NAME in reindex_note(TOKENIZER_V1)
