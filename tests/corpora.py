"""Small corpora written for the tests (our own text), shared by the test modules that need them."""

# Six one-sentence animal documents: "mice" is in cat and fox, "night" in cat and owl.
ANIMALS = """id,title,text
cat,Cats,"Cats are small felines that sleep most of the day and hunt mice at night."
dog,Dogs,"Dogs are loyal companions that need daily walks and enjoy playing fetch."
owl,Owls,"Owls are nocturnal birds of prey with silent flight and excellent night vision."
bee,Bees,"Bees pollinate flowers and produce honey in their hives."
fox,Foxes,"Foxes are clever wild canines that hunt small animals such as mice and rabbits."
cow,Cows,"Cows graze on grass and give milk on dairy farms."
"""
