from retrieval.text.tokenize import corpus_language, document_language, tokenize


def test_english_analyser_lowercases_drops_stopwords_and_stems():
    assert tokenize("The Running dogs are in the PARK.") == ["run", "dog", "park"]


def test_chinese_is_segmented_by_jieba():
    assert tokenize("我爱自然语言处理") == ["我", "爱", "自然语言", "处理"]


def test_mixed_text_in_one_pass_with_nfkc():
    # Full-width digits become ASCII; punctuation separates and is dropped.
    assert tokenize("北京大学的Transformers模型，２０２４年！") == ["北京大学", "的", "transform", "模型", "2024", "年"]


def test_language_detection():
    assert document_language("机器学习是人工智能的一个分支") == "zh"
    assert document_language("Machine learning is a branch of AI") == "en"
    assert corpus_language(["hello world"] * 99 + ["你好世界"]) == "mixed"
    assert corpus_language(["你好世界"] * 10) == "zh"
    assert corpus_language(["hello"] * 200) == "en"
